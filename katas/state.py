"""The learner's progress: one small versioned JSON file per kata folder, ``DIR/.kata/state.json``.

Updates hold a lock and replace the file atomically, so concurrent commands
(a watch loop and a hint, say) never lose each other's changes.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from katas.workspace import META_DIR, write_text_atomically

VERSION = 1
PENDING, PASSED, FAILED = "to do", "passed", "failing"


@dataclass
class Progress:
    status: str = PENDING
    hints: int = 0  # hints revealed so far
    revealed: bool = False  # the solution was shown before the kata passed
    checked_at: str | None = None


def state_path(folder: Path) -> Path:
    return folder / META_DIR / "state.json"


def load(folder: Path) -> dict[str, Progress]:
    try:
        doc = json.loads(state_path(folder).read_text())
    except (OSError, ValueError):
        return {}
    if doc.get("version") != VERSION:
        return {}
    return {name: Progress(**fields) for name, fields in doc.get("katas", {}).items()}


@contextlib.contextmanager
def updating(folder: Path) -> Iterator[dict[str, Progress]]:
    """Read, let the caller change, and write back the folder's progress, under a lock."""
    (folder / META_DIR).mkdir(parents=True, exist_ok=True)
    with open(folder / META_DIR / "state.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        progress = load(folder)
        yield progress
        doc = {"version": VERSION, "katas": {name: asdict(p) for name, p in sorted(progress.items())}}
        write_text_atomically(state_path(folder), json.dumps(doc, indent=2) + "\n")


def record_check(script: Path, solved: bool) -> None:
    """After `kata check` of a kata: passed when solved (its bug's probes and health pass), failing otherwise."""
    with updating(script.parent) as progress:
        entry = progress.setdefault(script.stem, Progress())
        entry.status = PASSED if solved else FAILED
        entry.checked_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
