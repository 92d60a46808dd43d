"""grads-accumulate: every optimizer step applies only the gradients computed since the previous step.

Rule: a hook on each trained parameter sees the first gradient contribution after
each optimizer step, before it is added to ``.grad``. At that moment ``.grad``
must be ``None`` or all zeros; otherwise the coming update also carries the
gradients of earlier steps. Zeroing before or after the step, ``set_to_none=False``,
``model.zero_grad()``, ``p.grad = None`` and k-step gradient accumulation all
pass; lowering the learning rate, clipping or rescaling the loss do not.
"""
from __future__ import annotations

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "grads-accumulate"
TITLE = "gradients reset between steps"


class Observer:
    def __init__(self, session):
        self.fresh: set[int] = set()  # parameters that had a contribution since their last step
        self.stale: set[int] = set()  # ... whose first contribution found old gradient in .grad
        self.steps = 0
        self.stale_steps = 0
        self.series: list[int] = []
        session.on("grad", ID, self.on_grad)
        session.on("step_post", ID, self.on_step)

    def on_grad(self, p, grad) -> None:
        if id(p) in self.fresh:
            return
        self.fresh.add(id(p))
        if p.grad is not None and bool(p.grad.ne(0).any()):
            self.stale.add(id(p))

    def on_step(self, step) -> None:
        ids = {id(p) for p in step.params}
        stale = len(self.stale & ids)
        self.steps += 1
        self.stale_steps += stale > 0
        self.series.append(stale)
        self.fresh -= ids
        self.stale -= ids

    def summary(self) -> dict:
        return {"steps": self.steps, "stale_steps": self.stale_steps, "stale_params_per_step": self.series}


def judge(obs: dict, facts: dict) -> Finding:
    steps, stale = obs["steps"], obs["stale_steps"]
    series = {"stale parameters per step": obs["stale_params_per_step"]}
    if steps == 0:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no optimizer step was observed")
    measured, threshold = f"{stale} of {steps} steps", "0"
    if stale:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"updates at {stale} of {steps} steps also carried gradients left over from earlier steps",
                       series)
    return Finding(ID, TITLE, PASS, measured, threshold, "every update used only its own step's gradients", series)
