"""train-mode: training forwards keep dropout and batch-norm in training mode.

Rule: for each model (top-level module), follow its training forwards (those a
backward pass reached). Once one of them ran dropout or batch-norm in training
behaviour (or once the model was evaluated, in evaluation behaviour, before its
first training forward), a later one in which every such layer behaved as in
evaluation is training in evaluation mode: the usual cause is a validation pass
that switched the model to evaluation and nothing switched it back. Freezing some layers on
purpose (batch-norm in eval, dropout still on) passes. A model whose training
forwards were all in evaluation behaviour from the first one cannot be told
from a deliberate freeze. Not applicable when no dropout or batch-norm ran in training.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.mode_ledger import forwards_in

ID = "train-mode"
TITLE = "training in train mode"
SYMPTOM_ID, SYMPTOM = "training-behaviour", "training forwards over the run"


@dataclass
class Observation:
    forwards: int = 0  # training forwards that ran dropout or batch-norm
    regressed: int = 0  # ... all in evaluation behaviour after an earlier one in training behaviour
    first_regressed: int | None = None  # its ordinal among those forwards
    frozen_from_start: list[str] = field(default_factory=list)  # models never in training behaviour
    eval_like: list[int] = field(default_factory=list)  # 1 per forward in evaluation behaviour, in order


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        forwards = forwards_in(self.session, "train")
        obs = Observation(forwards=len(forwards))
        was_active = self.evaluated_first(forwards)  # a model evaluated before it trained counts as switched
        names: dict[int, str] = {}
        for i, f in enumerate(forwards):
            names[f.module] = f.name
            eval_like = f.modes == {"inactive"}
            obs.eval_like.append(int(eval_like))
            if eval_like and was_active.get(f.module):
                obs.regressed += 1
                obs.first_regressed = i if obs.first_regressed is None else obs.first_regressed
            was_active[f.module] = was_active.get(f.module, False) or "active" in f.modes
        obs.frozen_from_start = sorted({names[m] for m, active in was_active.items() if not active})
        return obs

    def evaluated_first(self, training: list) -> dict[int, bool]:
        """Models whose first training forward came after an evaluation forward of theirs in eval behaviour:
        they were in training mode, were switched for evaluation, and (if now in eval) never switched back."""
        first = {}
        for f in training:
            first.setdefault(f.module, f.index)
        return {f.module: True for f in self.session.forwards
                if f.module in first and f.index < first[f.module] and f.modes == {"inactive"}
                and self.session.phase(f) == "eval"}


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.forwards:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no dropout or batch-norm layer ran in a training forward",
                       observed="nothing in a training forward depends on chance or on the batch")
    series = {"training forwards without noise or batch statistics (1 each, in order)": obs.eval_like}
    measured, threshold = f"{obs.regressed} of {obs.forwards} forwards", "0"
    if obs.regressed:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"dropout and batch-norm behaved as in evaluation in {obs.regressed} of {obs.forwards} "
                       f"training forwards (from forward {obs.first_regressed + 1} on), after earlier ones "
                       "had them active", series,
                       observed=f"training forwards changed behaviour during the run: from forward "
                                f"{obs.first_regressed + 1} on, {obs.regressed} of {obs.forwards} no longer depended on "
                                "chance or on the rest of their batch, as earlier ones did")
    if obs.frozen_from_start:
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                       f"{', '.join(obs.frozen_from_start)} trained with dropout and batch-norm in evaluation "
                       "behaviour from the start: a deliberate freeze cannot be told from a mistake", series,
                       observed=f"training forwards of {', '.join(obs.frozen_from_start)} never depended on chance or on "
                                "their batch: a deliberate choice cannot be told from a mistake")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   "no training forward ran with all its dropout and batch-norm in evaluation behaviour", series,
                   observed="training forwards behaved alike from the first epoch to the last")
