"""A bug in the catalogue: its documentation (read by the CLI, the docs and the tests) and its operator."""
from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from checker.expectation import BugStatus, status_of

if TYPE_CHECKING:  # the CLI reads difficulties without paying for libcst
    from katas.engine.operator import Operator

# What a difficulty means: how much the script's own run shows, and so what a learner must do to find the bug.
DIFFICULTIES = {
    "easy": "the run's own output differs visibly from the correct script's (an error, NaN, a printed loss or "
            "accuracy clearly off, a run several times longer); a careful reading of one function finds the line",
    "medium": "the output looks like the correct script's; one standard measurement (weights before and after a "
              "step, the learning rate per step, gradient norms, the mode of each layer) shows it",
    "hard": "the output looks like the correct script's; only a targeted experiment (evaluate twice, compare epochs' "
            "orders, a gradient against finite differences, what each parameter group does) reveals it",
}


# Each bug's difficulty on each reference it applies to, as measured (`python bench/measure_difficulty.py` writes it):
# what its planted run shows beside the correct script's (katas.observation).
MEASURED = Path(__file__).resolve().parent / "measured.json"


@functools.cache
def measured() -> dict:
    """The measured file: ``{"bugs": {bug: {reference: {"difficulty", "shows"}}}, "references": {...}, ...}``."""
    try:
        return json.loads(MEASURED.read_text())
    except (OSError, ValueError):
        return {}


def difficulty(bug: Bug, reference: str | None = None) -> str:
    """A bug's difficulty on ``reference`` as measured there, else the catalogue's. Without a reference: the level
    most of the references it was measured on give (the easier on a tie)."""
    found = measured().get("bugs", {}).get(bug.id, {})
    if reference is not None:
        return found.get(reference, {}).get("difficulty", bug.difficulty)
    levels = [entry["difficulty"] for entry in found.values()]
    if not levels:
        return bug.difficulty
    return max(DIFFICULTIES, key=lambda level: (levels.count(level), -list(DIFFICULTIES).index(level)))


def difficulties(bug: Bug) -> dict[str, str]:
    """The bug's measured difficulty on each reference it was measured on."""
    return {reference: entry["difficulty"] for reference, entry in measured().get("bugs", {}).get(bug.id, {}).items()}


# References that a distributed launcher runs, with their number of ranks; the others run as `python SCRIPT`.
LAUNCHED = {"ddp": 2}


def run_command(reference: str, script: str) -> str:
    """How a script made from ``reference`` is run by hand."""
    ranks = LAUNCHED.get(reference, 1)
    return f"torchrun --standalone --nproc-per-node {ranks} {script}" if ranks > 1 else f"python {script}"


@dataclass(frozen=True)
class Bug:
    id: str
    title: str
    difficulty: str  # a key of DIFFICULTIES: where its planted output looks normal (measured: see difficulty())
    observe: str  # what a learner would see when the script runs; never the cause
    hints: tuple[str, str, str]  # from a nudge to nearly the answer
    why: str
    fix: str
    probes: tuple[str, ...]  # the `kata check` probes this bug must trip
    follow_up: tuple[str, ...]  # what an interviewer asks next
    operator: Operator
    # References on which the planted script raises instead of running on: the error is what the learner observes,
    # and the check reports the crash (a fix that only silences the error is checked by the probes).
    raises: tuple[str, ...] = ()

    def status(self, probe_statuses: dict[str, str]) -> BugStatus:
        """From a check's probe statuses: fixed, still present or cannot tell."""
        return status_of(self.probes, probe_statuses)


class UnknownBug(LookupError):
    def __init__(self, name: str, known: list[str]):
        close = difflib.get_close_matches(name, known, n=1)
        guess = f" Did you mean `{close[0]}`?" if close else ""
        super().__init__(f"unknown bug `{name}`.{guess}\nKnown bugs: {', '.join(known)}")


def difficulty_shown(bug: Bug) -> str:
    """The measured difficulty in a few words: ``medium``, or ``medium; easy on binary`` where references differ."""
    main = difficulty(bug)
    others: dict[str, list[str]] = {}
    for reference, level in difficulties(bug).items():
        if level != main:
            others.setdefault(level, []).append(reference)
    return "; ".join([main, *(f"{level} on {', '.join(refs)}" for level, refs in others.items())])
