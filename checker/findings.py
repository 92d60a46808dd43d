"""What a probe concludes: a status, the measured figure, the threshold, and two ways of saying what it saw.

``message`` is the diagnosis: it may name the cause. ``observed`` is the symptom alone, what an engineer
with good instrumentation would see (a curve, a count, a value at a step), for reports that must not
give a kata's answer away; it defaults to the diagnosis where that names no cause.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Status(str, Enum):
    """A finding's status. A ``str`` as well, so that a record read back from JSON compares equal, and its
    value is what the JSON report and the terminal show."""

    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "n/a"
    ERROR = "error"  # the probe itself failed to observe
    CANNOT_TELL = "cannot-tell"  # the probe applies, but what the run showed does not decide either way
    # A practice whose harm the run does not show, or a measured cost above a documented threshold (compute spent
    # on padding): worth fixing, but the check still passes. A kata whose bug it is stays unsolved while it stands.
    ADVICE = "advice"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


PASS, FAIL, NOT_APPLICABLE, ERROR, CANNOT_TELL, ADVICE = Status


@dataclass
class Finding:
    probe: str
    title: str
    status: Status
    measured: str = ""
    threshold: str = ""
    message: str = ""
    series: dict[str, list] = field(default_factory=dict)
    parts: list["Finding"] = field(default_factory=list)
    observed: str = ""  # the symptom without its cause; empty means `message` names no cause

    def __post_init__(self) -> None:
        self.status = Status(self.status)  # a status read back from a record as text is one of the Status members

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, ERROR)

    @property
    def flagged(self) -> bool:
        """Failed, or advises: what a kata's bug leaves visible."""
        return self.failed or self.status == ADVICE

    @property
    def symptom(self) -> str:
        return self.observed or self.message

