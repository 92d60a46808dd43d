"""clip-order: the gradients an optimizer step applies are within the clip value.

Rule: every ``clip_grad_norm_`` call records its parameters, ``max_norm`` and
norm type, and every ``clip_grad_value_`` call its parameters and ``clip_value``
(a clip of the infinity norm: the largest element's size). At each later
optimizer step, just before the update, the gradient norm of each clipped
parameter set must be at most ``max_norm`` (times 1 + 1e-6).
Clipping after ``optimizer.step()`` leaves the applied gradients unclipped. The
figures also show how often clipping engaged; a clip value that is never
exceeded cannot tell the two orders apart. A manual update (no ``torch.optim``)
is seen when the next clip or backward begins: if a clip ran between the
backward and the update, the update applied clipped gradients; if the update
came first, the clip that follows measured exactly the gradients it applied.
A clip (with a finite value) is *applied* when an update follows it before the
next backward pass, *unapplied* when the next backward pass comes first (it
clipped gradients that no update used). Every clip unapplied (at least 3) while
no applied gradient exceeded the value is advice: the order is that of a clip
after the step, harmless in this run only because clipping never had to engage
(a DQN's ``clip_grad_value_(…, 100)``). A ``max_norm`` of infinity measures the
norm and is never counted. Not applicable without clipping.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "clip-order"
TITLE = "clipping before the step"
SYMPTOM_ID, SYMPTOM = "update-norm", "gradient norm at the update"
RTOL = 1e-6
MIN_UNAPPLIED = 3  # clips that no update followed, with none that one did, before the order is advised on


@dataclass
class Observation:
    calls: int = 0
    engaged: int = 0
    steps: int = 0
    over: int = 0
    max_norm: float | None = None
    applied_norms: list[float] = field(default_factory=list)
    applied: int = 0  # clips an update followed before the next backward pass
    unapplied: int = 0  # clips the next backward pass followed first: no update used what they clipped


class Observer:
    def __init__(self, session):
        self.session = session
        self.clipped: dict[tuple, tuple] = {}  # parameter ids -> (params, max_norm, norm_type)
        self.obs = Observation()
        self.clip_since_backward: tuple[float, float] | None = None  # (max_norm, measured) of the last clip
        self.manual_since_backward = False
        self.pending = False  # a clip with a finite value that no update or backward has followed yet
        session.on(Event.CLIP, ID, self.on_clip)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.BACKWARD, ID, self.on_backward)

    def on_backward(self, loss) -> None:
        self.clip_since_backward, self.manual_since_backward = None, False
        self.obs.unapplied += self.pending
        self.pending = False

    def applies_clip(self) -> None:
        self.obs.applied += self.pending
        self.pending = False

    def count(self, norm: float, max_norm: float) -> None:
        self.obs.steps += 1
        self.obs.over += norm > max_norm * (1 + RTOL)
        self.obs.applied_norms.append(norm)

    def on_clip(self, params, max_norm, norm_type, total_norm) -> None:
        self.obs.calls += 1
        self.obs.engaged += total_norm > max_norm
        self.obs.max_norm = max_norm
        self.clipped[tuple(id(p) for p in params)] = (params, max_norm, norm_type)
        if self.manual_since_backward:  # the update came before this clip: it applied what the clip measured
            self.count(total_norm, max_norm)
        self.clip_since_backward = (max_norm, total_norm)
        self.pending = math.isfinite(max_norm)

    def on_update(self, update) -> None:
        if update.manual:
            self.applies_clip()
            self.manual_since_backward = True
            if self.clip_since_backward is not None:
                max_norm, measured = self.clip_since_backward
                self.count(min(measured, max_norm), max_norm)
            return
        ids = {id(p) for p in update.params}
        sets = [entry for key, entry in self.clipped.items() if ids.intersection(key)]
        if not sets:
            return
        self.applies_clip()
        ratio, norm, max_norm = max(
            (norm / max_norm if max_norm else float("inf"), norm, max_norm)
            for params, max_norm, norm_type in sets
            for norm in [self.session.grad_norm(params, norm_type)]
        )
        self.count(norm, max_norm)

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.calls:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="gradients are not clipped")
    if not obs.steps:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no update followed a clipping call")
    steps, over, clip = obs.steps, obs.over, obs.max_norm
    series = {"applied gradient norm per step": obs.applied_norms, "clip value": [clip]}
    measured, threshold = f"{over} of {steps} steps > {clip:g}", "0"
    engaged = f"clipping engaged at {obs.engaged} of {obs.calls} calls"
    if over:
        peak = max(obs.applied_norms)
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"the gradients applied exceeded the clip value {clip:g} at {over} of {steps} steps "
                       f"(up to {peak:.3g}); {engaged}", series,
                       observed=f"the gradient norm at {over} of {steps} updates was above the clip value {clip:g} "
                                f"(up to {peak:.3g})")
    if obs.unapplied >= MIN_UNAPPLIED and not obs.applied:
        seen = (f"none of the {obs.unapplied} clips was followed by an update before the next backward pass: the "
                "gradients they clipped were never applied")
        return Finding(ID, TITLE, ADVICE, f"0 of {obs.unapplied} clips applied", "all",
                       f"{seen}, because each clip ran after the update it was meant for. No applied gradient exceeded "
                       f"the clip value {clip:g} in this run ({engaged}), so the order changed nothing here; with "
                       "larger gradients the updates would go unclipped. Clip between backward() and step()",
                       series, observed=seen)
    return Finding(ID, TITLE, PASS, measured, threshold, f"every step applied gradients within the clip value; {engaged}",
                   series, observed="the gradient norm at every update was within the clip value")
