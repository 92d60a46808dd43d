"""non-finite: losses, gradients and parameters stay finite, and no batch is skipped to hide it.

Rule: the loss handed to ``backward()`` must be finite, the gradients an update
applies must be finite, and the parameters must be finite after every update
(optimizer steps and manual updates alike). Every training batch must also lead
to its update (k-step gradient accumulation allowed; a GradScaler's skipped step
counts as attempted), which rejects ``if not isfinite(loss): continue``; a run
without any update is the ``weights-update`` probe's finding, not this one's.
``nan_to_num`` on the loss leaves non-finite gradients and fails too, and so does
``xlogy`` (its gradient at 0·log 0 is 0/0). An epsilon, a clamp, ``log_softmax``,
``logsigmoid`` or ``binary_cross_entropy_with_logits`` pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "non-finite"
TITLE = "finite losses, gradients and weights"
SYMPTOM_ID, SYMPTOM = "non-finite", "NaN or infinity"


@dataclass
class Observation:
    updates: int = 0
    bad_grads: int = 0
    bad_params: int = 0
    grad_norms: list[float | None] = field(default_factory=list)


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        session.on(Event.UPDATE_PRE, ID, self.on_update_pre)
        session.on(Event.UPDATE_POST, ID, self.on_update_post)

    def on_update_pre(self, update) -> None:
        norm = self.session.grad_norm(update.params)
        self.obs.updates += 1
        self.obs.bad_grads += not math.isfinite(norm)
        self.obs.grad_norms.append(norm if math.isfinite(norm) else None)

    def on_update_post(self, update) -> None:
        self.obs.bad_params += not math.isfinite(self.session.total_norm(update.params))

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    updates = obs.updates
    if updates == 0 and not facts.losses:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no training was observed")
    bad_losses = sum(v is None for v in facts.losses)
    skipped, batches = facts.skipped_updates() if updates or facts.scaler_skips else (0, 0)
    problems = []
    if bad_losses:
        first = next(i for i, v in enumerate(facts.losses) if v is None) + 1
        problems.append(f"the loss was NaN or infinite at {bad_losses} of {len(facts.losses)} backward passes "
                        f"(first at backward {first})")
    if obs.bad_grads:
        problems.append(f"gradients were NaN or infinite at {obs.bad_grads} of {updates} updates")
    if obs.bad_params:
        problems.append(f"weights were NaN or infinite after {obs.bad_params} of {updates} updates")
    if skipped:
        problems.append(f"{skipped} of {batches} training batches ended without their update")
    series = {"loss per backward": facts.losses, "gradient norm per update": obs.grad_norms}
    worst = max(bad_losses, obs.bad_grads, obs.bad_params)
    measured = f"{worst} of {max(updates, len(facts.losses))} steps" + (f", {skipped} skipped" if skipped else "")
    if problems:
        return Finding(ID, TITLE, FAIL, measured, "0", "; ".join(problems), series)
    return Finding(ID, TITLE, PASS, measured, "0", "every loss, gradient and weight stayed finite", series)
