"""The mark that makes a folder an interview task's candidate folder, and the record of `--diagnose` kept in it.

``kata check`` reads it to report symptoms only (as for a kata); ``kata check --diagnose`` in the folder adds the
time to the mark, and ``kata grade`` reports it.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

MARK = ".kata-task.json"
SCHEMA = "torch-katas/task/1"


def mark(nproc: int = 1) -> str:
    """The mark's text for a new candidate folder: how many ranks its script runs as (``kata check`` launches them
    as the brief says to run it), and the record of ``--diagnose``."""
    return json.dumps({"schema": SCHEMA, "nproc": nproc, "diagnosed": []}, indent=2) + "\n"


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


def record_diagnosis(script: Path) -> None:
    from katas.workspace import write_text_atomically

    folder = script.resolve().parent
    doc = read(folder) or {"schema": SCHEMA}
    doc["diagnosed"] = [*doc.get("diagnosed", []), datetime.now(timezone.utc).isoformat(timespec="seconds")]
    write_text_atomically(folder / MARK, json.dumps(doc, indent=2) + "\n")


def diagnoses(folder: Path) -> list[str] | None:
    """When `kata check --diagnose` ran in the candidate folder; None when the mark is gone (removed by hand?)."""
    doc = read(folder)
    return list(doc.get("diagnosed", [])) if doc else None
