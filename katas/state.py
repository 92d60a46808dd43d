"""The learner's progress: one small versioned JSON file per kata folder, ``DIR/.kata/state.json``.

Updates hold a lock and replace the file atomically, so concurrent commands
(a watch loop and a hint, say) never lose each other's changes. A file that
cannot be read is never overwritten in silence: an update first keeps it as
``state.json.bak-<time>`` and says so; one written by a newer version is refused.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import click

from katas.commands.common import KataError
from katas.workspace import META_DIR, write_text_atomically

VERSION = 1
PENDING, PASSED, FAILED = "to do", "passed", "failing"


@dataclass
class Progress:
    status: str = PENDING
    hints: int = 0  # hints revealed so far
    revealed: bool = False  # the solution was shown before the kata passed
    checked_at: str | None = None
    diagnosed: bool = False  # `kata check --diagnose` named the causes before the kata passed; counts like a hint


class NewerState(KataError):
    """The progress file was written by a newer torch-katas; it is left alone."""


def state_path(folder: Path) -> Path:
    return folder / META_DIR / "state.json"


def read(folder: Path) -> tuple[dict[str, Progress], str | None]:
    """The folder's progress, and why its file cannot be read (None when it can, or when there is none)."""
    path = state_path(folder)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"cannot be read ({exc.strerror})"
    except ValueError:
        return {}, "is not valid JSON"
    version = doc.get("version") if isinstance(doc, dict) else None
    if isinstance(version, int) and version > VERSION:
        raise NewerState(f"{path} was written by a newer torch-katas (progress format {version}; this one reads "
                         f"{VERSION}); upgrade torch-katas to use this folder")
    if version != VERSION or not isinstance(doc.get("katas"), dict):
        return {}, "is not a progress file this version knows"
    try:
        return {name: Progress(**fields) for name, fields in doc["katas"].items()}, None
    except TypeError:
        return {}, "is not a progress file this version knows"


def load(folder: Path) -> dict[str, Progress]:
    """The folder's progress, to read only; an unreadable file reads as no progress, with a warning."""
    progress, problem = read(folder)
    if problem:
        click.echo(f"Warning: {state_path(folder)} {problem}; every kata shows as not started "
                   "(the file is kept aside at the next update).", err=True)
    return progress


@contextlib.contextmanager
def updating(folder: Path) -> Iterator[dict[str, Progress]]:
    """Read, let the caller change, and write back the folder's progress, under a lock."""
    (folder / META_DIR).mkdir(parents=True, exist_ok=True)
    with open(folder / META_DIR / "state.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        progress, problem = read(folder)
        if problem:
            backup = keep_aside(state_path(folder))
            click.echo(f"Warning: {state_path(folder)} {problem}; it is kept as {backup}, and progress starts afresh.",
                       err=True)
        yield progress
        doc = {"version": VERSION, "katas": {name: asdict(p) for name, p in sorted(progress.items())}}
        write_text_atomically(state_path(folder), json.dumps(doc, indent=2) + "\n")


def keep_aside(path: Path) -> Path:
    """Move ``path`` to ``<name>.bak-<time>`` (a new name, never an existing one)."""
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    backup, n = path.with_name(f"{path.name}.bak-{stamp}"), 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    os.replace(path, backup)
    return backup


def record_check(script: Path, solved: bool) -> None:
    """After `kata check` of a kata: passed when solved (its bug's probes and health pass), failing otherwise."""
    with updating(script.parent) as progress:
        entry = progress.setdefault(script.stem, Progress())
        entry.status = PASSED if solved else FAILED
        entry.checked_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
