"""non-finite: losses, gradients and parameters stay finite, and no batch is skipped to hide it.

Rule: the loss handed to ``backward()`` must be finite, the gradients an
optimizer step applies must be finite, and the parameters must be finite after
every step. Every training batch must also lead to its optimizer update (k-step
gradient accumulation allowed), which rejects ``if not isfinite(loss): continue``.
``nan_to_num`` on the loss leaves non-finite gradients and fails too, and so does
``xlogy`` (its gradient at 0·log 0 is 0/0). An epsilon, a clamp, ``log_softmax``,
``logsigmoid`` or ``binary_cross_entropy_with_logits`` pass.
"""
from __future__ import annotations

import math

from checker.facts import skipped_updates
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "non-finite"
TITLE = "finite losses, gradients and weights"


class Observer:
    def __init__(self, session):
        self.session = session
        self.steps = 0
        self.bad_grads = 0
        self.bad_params = 0
        self.grad_norms: list[float | None] = []
        session.on("step_pre", ID, self.on_step_pre)
        session.on("step_post", ID, self.on_step_post)

    def on_step_pre(self, step) -> None:
        norm = step.grad_norm
        self.steps += 1
        self.bad_grads += not math.isfinite(norm)
        self.grad_norms.append(norm if math.isfinite(norm) else None)

    def on_step_post(self, step) -> None:
        self.bad_params += not math.isfinite(self.session.total_norm(step.params))

    def summary(self) -> dict:
        return {"steps": self.steps, "bad_grads": self.bad_grads, "bad_params": self.bad_params,
                "grad_norms": self.grad_norms}


def judge(obs: dict, facts: dict) -> Finding:
    steps = obs["steps"]
    if steps == 0 and not facts["losses"]:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no training was observed")
    bad_losses = sum(v is None for v in facts["losses"])
    skipped, batches = skipped_updates(facts)
    problems = []
    if bad_losses:
        problems.append(f"the loss was NaN or infinite at {bad_losses} of {len(facts['losses'])} backward passes")
    if obs["bad_grads"]:
        problems.append(f"gradients were NaN or infinite at {obs['bad_grads']} of {steps} steps")
    if obs["bad_params"]:
        problems.append(f"weights were NaN or infinite after {obs['bad_params']} of {steps} steps")
    if skipped:
        problems.append(f"{skipped} of {batches} training batches ended without their optimizer update")
    series = {"loss per backward": facts["losses"], "gradient norm per step": obs["grad_norms"]}
    worst = max(bad_losses, obs["bad_grads"], obs["bad_params"])
    measured = f"{worst} of {steps} steps" + (f", {skipped} skipped" if skipped else "")
    threshold = "0"
    if problems:
        return Finding(ID, TITLE, FAIL, measured, threshold, "; ".join(problems), series)
    return Finding(ID, TITLE, PASS, measured, threshold, "every loss, gradient and weight stayed finite", series)
