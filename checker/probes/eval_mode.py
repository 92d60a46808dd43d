"""eval-mode: evaluation runs with dropout off and batch-norm frozen.

Rule: in every evaluation forward (see :mod:`checker.session`: run without
gradients or never reached by a backward pass, and not feeding training) no
dropout may be applied and no batch-norm may use batch statistics or update its
running statistics. ``model.eval()``, ``model.train(False)`` and per-module
``eval()`` pass. Not applicable when no dropout or batch-norm runs in an
evaluation forward, or no evaluation ran.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes.mode_ledger import blocks

ID = "eval-mode"
TITLE = "validation in eval mode"
SYMPTOM_ID, SYMPTOM = "eval-repeatability", "repeatable evaluation"


@dataclass
class Observation:
    forwards: int = 0  # evaluation forwards that ran dropout or batch-norm
    active: int = 0  # ... with either in training behaviour
    active_per_pass: list[int] = field(default_factory=list)


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        runs = blocks(self.session, "eval")
        per_pass = [sum("active" in f.modes for f in run) for run in runs]
        return Observation(sum(len(run) for run in runs), sum(per_pass), per_pass)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.forwards:
        message = ("no evaluation was observed" if not facts.eval_forwards else
                   "no dropout or batch-norm layer ran during evaluation")
        observed = "no evaluation was observed" if not facts.eval_forwards else "nothing in evaluation can vary"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=message, observed=observed)
    series = {"forwards that depend on chance or on their batch, per validation pass": obs.active_per_pass}
    measured, threshold = f"{obs.active} of {obs.forwards} forwards", "0"
    if obs.active:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"dropout or batch-norm behaved as in training in {obs.active} of {obs.forwards} "
                       "evaluation forwards", series,
                       observed=f"{obs.active} of {obs.forwards} evaluation forwards depended on the random state or on "
                                "the other samples of their batch: two evaluations of the same weights can disagree")
    return Finding(ID, TITLE, PASS, measured, threshold, "evaluation ran with dropout off and batch-norm frozen", series,
                   observed="every evaluation forward was repeatable")
