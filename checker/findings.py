"""What a probe concludes: a status, the measured figure, the threshold, and two ways of saying what it saw.

``message`` is the diagnosis: it may name the cause. ``observed`` is the symptom alone, what an engineer
with good instrumentation would see (a curve, a count, a value at a step), for reports that must not
give a kata's answer away; it defaults to the diagnosis where that names no cause.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASS, FAIL, NOT_APPLICABLE, ERROR = "pass", "fail", "n/a", "error"
CANNOT_TELL = "cannot-tell"  # the probe applies, but what the run showed does not decide either way
# A measured cost above a documented threshold (compute spent on padding): worth fixing, but the script is not
# wrong, so the check still passes. A kata whose bug is that cost is not solved while its probe advises.
ADVICE = "advice"


@dataclass
class Finding:
    probe: str
    title: str
    status: str
    measured: str = ""
    threshold: str = ""
    message: str = ""
    series: dict[str, list] = field(default_factory=dict)
    parts: list["Finding"] = field(default_factory=list)
    observed: str = ""  # the symptom without its cause; empty means `message` names no cause

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

    def to_json(self) -> dict:
        data = asdict(self)
        data["observed"] = self.symptom
        if self.parts:
            data["parts"] = [part.to_json() for part in self.parts]
        else:
            del data["parts"]
        return data
