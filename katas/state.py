"""The learner's progress: one small versioned JSON file per workspace, ``DIR/.kata/state.json``.

Progress on the shipped examples (``broken/``) is the learner's too, so it is kept
in the learner's workspace beside them (``practice/``), in a section of its own,
never in the examples' folder; the first command that records some starts that
workspace when there is none yet, and says so (as the first `kata new` does).

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
from enum import Enum
from pathlib import Path
from typing import Iterator

import click

from katas.errors import KataError
from katas.workspace import META_DIR, default_workspace, find_workspace, is_examples, start_workspace, write_text_atomically

VERSION = 1
PENDING, PASSED, FAILED = "to do", "passed", "failing"


class Section(str, Enum):
    """Where in a workspace's progress file a kata's progress is: its own katas, or the shipped examples."""

    KATAS = "katas"
    EXAMPLES = "examples"  # absent from files written before it existed, which read the same


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


def home(folder: Path, start: bool) -> tuple[Path | None, Section]:
    """The workspace that keeps the progress of the katas in ``folder``, and its section: ``folder`` itself, or
    for shipped examples the workspace beside them (None when there is none and ``start`` is False)."""
    if not is_examples(folder):
        return folder, Section.KATAS
    workspace = find_workspace(folder.parent)
    if workspace is None and start:
        workspace = default_workspace(folder)
        start_workspace(workspace)
        click.echo(f"Started your workspace {workspace}/: progress on the examples is kept there, and your own "
                   "katas go there (`kata new`).", err=True)
    return workspace, Section.EXAMPLES


def read(workspace: Path) -> tuple[dict[Section, dict[str, Progress]], str | None]:
    """The workspace's progress by section, and why its file cannot be read (None when it can, or when there is
    none)."""
    path = state_path(workspace)
    empty: dict[Section, dict[str, Progress]] = {section: {} for section in Section}
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return empty, None
    except OSError as exc:
        return empty, f"cannot be read ({exc.strerror})"
    except ValueError:
        return empty, "is not valid JSON"
    version = doc.get("version") if isinstance(doc, dict) else None
    if isinstance(version, int) and version > VERSION:
        raise NewerState(f"{path} was written by a newer torch-katas (progress format {version}; this one reads "
                         f"{VERSION}); upgrade torch-katas to use this folder")
    unknown = "is not a progress file this version knows"
    if version != VERSION:
        return empty, unknown
    sections = {section: doc.get(section.value, {} if section is Section.EXAMPLES else None) for section in Section}
    if not all(isinstance(entries, dict) for entries in sections.values()):
        return empty, unknown
    try:
        return {section: {name: Progress(**fields) for name, fields in entries.items()}
                for section, entries in sections.items()}, None
    except TypeError:
        return empty, unknown


def load(folder: Path) -> dict[str, Progress]:
    """The progress of the katas in ``folder``, to read only; an unreadable file reads as no progress, with a
    warning."""
    workspace, section = home(folder, start=False)
    if workspace is None:
        return {}
    progress, problem = read(workspace)
    if problem:
        click.echo(f"Warning: {state_path(workspace)} {problem}; every kata shows as not started "
                   "(the file is kept aside at the next update).", err=True)
    return progress[section]


@contextlib.contextmanager
def updating(folder: Path, start: bool = True) -> Iterator[dict[str, Progress]]:
    """Read, let the caller change, and write back the progress of the katas in ``folder``, under a lock. For shipped
    examples with no workspace beside them: one is started, or with ``start`` False nothing is kept."""
    workspace, section = home(folder, start=start)
    if workspace is None:
        yield {}
        return
    (workspace / META_DIR).mkdir(parents=True, exist_ok=True)
    with open(workspace / META_DIR / "state.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        progress, problem = read(workspace)
        if problem:
            backup = keep_aside(state_path(workspace))
            click.echo(f"Warning: {state_path(workspace)} {problem}; it is kept as {backup}, and progress starts "
                       "afresh.", err=True)
        yield progress[section]
        doc = {"version": VERSION, **{part.value: {name: asdict(p) for name, p in sorted(entries.items())}
                                      for part, entries in progress.items() if entries or part is Section.KATAS}}
        write_text_atomically(state_path(workspace), json.dumps(doc, indent=2) + "\n")


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
    """After `kata check` of a kata: passed when solved (its bug's probes and health pass), failing otherwise. A
    check of a shipped example starts no workspace (a hint does): it is kept only where one exists."""
    with updating(script.parent, start=False) as progress:
        entry = progress.setdefault(script.stem, Progress())
        entry.status = PASSED if solved else FAILED
        entry.checked_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
