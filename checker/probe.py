"""A probe, typed: what its module declares (see :mod:`checker.probes`), read once and checked.

Probe modules stay plain modules (their constants, ``Observation``, ``Observer`` and judges are what tests and
docs read); the session and the verdict use this record instead of looking attributes up on the module.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from checker.findings import Finding

REQUIRED = ("ID", "TITLE", "SYMPTOM_ID", "SYMPTOM", "Observation", "Observer", "judge")


@dataclass(frozen=True)
class Probe:
    id: str
    title: str
    symptom_id: str  # the same check named by what is seen, never by its cause
    symptom: str
    module: ModuleType
    advises: bool = False  # its findings are advice at most: the check still passes
    advice_shows: bool = False  # its advice, though it can fail, is a symptom too (not "the symptom did not show")
    uses: tuple[str, ...] = ()  # shared measurements whose errors are this probe's too
    judge_ranks: Callable[[list, list], Finding] | None = None  # the ranks compared, for a process group

    @classmethod
    def of(cls, module: ModuleType) -> "Probe":
        missing = [name for name in REQUIRED if not hasattr(module, name)]
        if missing:
            raise TypeError(f"probe module {module.__name__} does not declare {', '.join(missing)}")
        return cls(module.ID, module.TITLE, module.SYMPTOM_ID, module.SYMPTOM, module,
                   advises=bool(getattr(module, "ADVISES", False)),
                   advice_shows=bool(getattr(module, "ADVICE_SHOWS", False)), uses=tuple(getattr(module, "USES", ())),
                   judge_ranks=getattr(module, "judge_ranks", None))

    def observer(self, session: Any) -> Any:
        """The probe's observer, subscribed to ``session``'s events (read from the module at call time)."""
        return self.module.Observer(session)

    def observation(self, fields: dict) -> Any:
        """The observation the record holds for this probe (a misspelt field is an error)."""
        return self.module.Observation(**fields)

    def judge(self, observation: Any, facts: Any) -> Finding:
        return self.module.judge(observation, facts)
