"""What a probe concludes: a status, the measured figure, the threshold and the symptom."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASS, FAIL, NOT_APPLICABLE, ERROR = "pass", "fail", "n/a", "error"
CANNOT_TELL = "cannot-tell"  # the probe applies, but what the run showed does not decide either way


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

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, ERROR)

    def to_json(self) -> dict:
        data = asdict(self)
        if not self.parts:
            del data["parts"]
        return data
