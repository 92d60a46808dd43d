"""The mark that makes a folder an interview task's candidate folder, and what is recorded in it.

``kata check`` reads it to report symptoms only (as for a kata), and records in it the time of the first check
(when the task was not handed over with ``kata interview --start``) and of each ``--diagnose``; ``kata explain``,
``kata bugs`` and ``kata hint`` refuse to answer inside it; ``kata grade`` reads the candidate's name, the
hand-over and the record of ``--diagnose`` from it.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

MARK = ".kata-task.json"
SCHEMA = "torch-katas/task/1"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def mark(nproc: int = 1, candidate: str | None = None) -> str:
    """The mark's text for a new candidate folder: how many ranks its script runs as (``kata check`` launches them
    as the brief says to run it), the candidate's name, the hand-over, the first check and the record of
    ``--diagnose``."""
    doc = {"schema": SCHEMA, "nproc": nproc, "candidate": candidate, "handed_over": None, "first_check": None,
           "diagnosed": []}
    return json.dumps(doc, indent=2) + "\n"


def nproc(script: Path) -> int | None:
    """The ranks a task's script runs as, from its folder's mark; None outside a task folder."""
    doc = read(script.resolve().parent)
    if doc is None:
        return None
    value = doc.get("nproc", 1)
    return value if isinstance(value, int) and value >= 1 else 1


def read(folder: Path) -> dict | None:
    try:
        doc = json.loads((folder / MARK).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def is_task_script(script: Path) -> bool:
    return read(script.resolve().parent) is not None


def task_folder_around(folder: Path) -> Path | None:
    """The candidate folder that holds ``folder`` (or is it), or None."""
    folder = folder.resolve()
    return next((f for f in (folder, *folder.parents) if read(f) is not None), None)


def update(folder: Path, **changes) -> dict:
    """Write ``changes`` into the folder's mark (made anew if it was removed); returns the mark as written."""
    from katas.workspace import write_text_atomically

    doc = read(folder) or {"schema": SCHEMA}
    doc.update(changes)
    write_text_atomically(folder / MARK, json.dumps(doc, indent=2) + "\n")
    return doc


def record_diagnosis(script: Path) -> None:
    folder = script.resolve().parent
    update(folder, diagnosed=[*(read(folder) or {}).get("diagnosed", []), now()])


def record_check(script: Path) -> None:
    """The first `kata check` of a task's script: when the task was not handed over with `kata interview --start`,
    its time stands for the hand-over."""
    folder = script.resolve().parent
    doc = read(folder)
    if doc is not None and not doc.get("handed_over") and not doc.get("first_check"):
        update(folder, first_check=now())


def diagnoses(folder: Path) -> list[str] | None:
    """When `kata check --diagnose` ran in the candidate folder; None when the mark is gone (removed by hand?)."""
    doc = read(folder)
    return list(doc.get("diagnosed", [])) if doc else None
