"""What a kata or an interview task must show to pass, beside a clean check: its planted bugs gone.

A kata passes only when the probes its bug trips pass (a probe that cannot tell, or could not observe, does not
confirm a fix) and the script still trains all of its training (a ``break`` out of the loop is not a fix). A kata
made from a script of your own is not held to what that script already showed before its bug was planted (its
*baseline*): with the bug fixed and nothing failing beyond those, it passes, and says what was there before.
This module imports nothing heavy: `kata new` and the catalogue read it without torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from checker.findings import ADVICE, ERROR, FAIL, PASS


class BugStatus(str, Enum):
    FIXED = "fixed"
    STILL_PRESENT = "still present"
    CANNOT_TELL = "cannot tell"
    NOT_CHECKED = "not checked"  # the script did not run to its end

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


FLAGGED = (FAIL, ERROR, ADVICE)  # what a bug's probe shows while the bug is there (Finding.flagged)


@dataclass(frozen=True)
class Expectation:
    probes: frozenset[str]  # the probes the planted bugs trip
    baseline: frozenset[str] = frozenset()  # failing keys (see checker.verdict.failing) before the bug was planted
    subject: str = "this kata's symptom"  # what the report says is gone or still there

    def status(self, statuses: dict[str, str]) -> BugStatus:
        """From a check's probe statuses: fixed (every probe passes), still present, or cannot tell."""
        return status_of(self.probes, statuses)


def status_of(probes, statuses: dict[str, str]) -> BugStatus:
    """A bug's status from the statuses of the probes it trips."""
    found = [statuses.get(p) for p in probes]
    if any(s in FLAGGED for s in found):
        return BugStatus.STILL_PRESENT
    return BugStatus.FIXED if all(s == PASS for s in found) else BugStatus.CANNOT_TELL
