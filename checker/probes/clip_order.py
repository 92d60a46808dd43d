"""clip-order: the gradients an optimizer step applies are within the clip value.

Rule: every ``clip_grad_norm_`` call records its parameters, ``max_norm`` and
norm type. At each later optimizer step, just before the update, the gradient
norm of each clipped parameter set must be at most ``max_norm`` (times 1 + 1e-6).
Clipping after ``optimizer.step()`` leaves the applied gradients unclipped. The
figures also show how often clipping engaged; a clip value that is never
exceeded cannot tell the two orders apart. Not applicable without clipping.
"""
from __future__ import annotations

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "clip-order"
TITLE = "clipping before the step"
RTOL = 1e-6


class Observer:
    def __init__(self, session):
        self.session = session
        self.clipped: dict[tuple, tuple] = {}  # parameter ids -> (params, max_norm, norm_type)
        self.calls = 0
        self.engaged = 0
        self.steps = 0
        self.over = 0
        self.max_norm = None
        self.applied: list[float] = []
        session.on("clip", ID, self.on_clip)
        session.on("step_pre", ID, self.on_step)

    def on_clip(self, params, max_norm, norm_type, total_norm) -> None:
        self.calls += 1
        self.engaged += total_norm > max_norm
        self.max_norm = max_norm
        self.clipped[tuple(id(p) for p in params)] = (params, max_norm, norm_type)

    def on_step(self, step) -> None:
        ids = {id(p) for p in step.params}
        sets = [entry for key, entry in self.clipped.items() if ids.intersection(key)]
        if not sets:
            return
        self.steps += 1
        ratio, norm = max(
            (norm / max_norm if max_norm else float("inf"), norm)
            for params, max_norm, norm_type in sets
            for norm in [self.session.total_norm([p.grad for p in params if p.grad is not None], norm_type)]
        )
        self.over += ratio > 1 + RTOL
        self.applied.append(norm)

    def summary(self) -> dict:
        return {"calls": self.calls, "engaged": self.engaged, "steps": self.steps, "over": self.over,
                "max_norm": self.max_norm, "applied_norms": self.applied}


def judge(obs: dict, facts: dict) -> Finding:
    if not obs["calls"]:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="gradients are not clipped")
    if not obs["steps"]:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no optimizer step followed a clipping call")
    steps, over, clip = obs["steps"], obs["over"], obs["max_norm"]
    series = {"applied gradient norm per step": obs["applied_norms"], "clip value": [clip]}
    measured, threshold = f"{over} of {steps} steps > {clip:g}", "0"
    engaged = f"clipping engaged at {obs['engaged']} of {obs['calls']} calls"
    if over:
        peak = max(obs["applied_norms"])
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"the gradients applied exceeded the clip value {clip:g} at {over} of {steps} steps "
                       f"(up to {peak:.3g}); {engaged}", series)
    return Finding(ID, TITLE, PASS, measured, threshold, f"every step applied gradients within the clip value; {engaged}",
                   series)
