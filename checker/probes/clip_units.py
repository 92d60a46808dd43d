"""clip-units: the norm a clip measured is the norm of the gradients the step applies.

Rule: ``clip_grad_norm_`` returns the norm r it measured and scales the
gradients to ``min(r, max_norm)``. At the optimizer step that follows it (with no
backward in between), the norm of the same parameters' gradients must be
``min(r, max_norm)`` within 1e-3 relative. With a GradScaler, clipping before
``scaler.unscale_(optimizer)`` measures scaled gradients (r = scale x the true
norm) and ``scaler.step`` unscales them afterwards, so the step applies
``max_norm / scale``: measured on the ``text`` reference 0.49999 (correct, clip
0.5) against 7.6e-6 (scale 65536). A script that clips after unscaling, without a
GradScaler or with a disabled one, passes: nothing changes the gradients
between the clip and the step. Clipping after the step is ``clip-order``'s
concern (no clip precedes the step here). Known limits: anything that rescales the
gradients between the clip and the step fails, e.g. ``p.grad /= K`` after the
clip (the clip then measured K times the applied gradient: put it before the
clip), and so would clipping still-scaled gradients with ``max_norm`` multiplied
by the current scale (equivalent, and not seen in practice). Manual updates are not judged, nor steps
whose gradients were reset or set to None after the clip (no units to compare; ``weights-update`` sees those). Cheap:
one norm per clip-then-step pair, only where clipping happens.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "clip-units"
TITLE = "clipped norm is the applied norm"
SYMPTOM_ID, SYMPTOM = "clipped-norm", "gradient norm after clipping"
RTOL = 1e-3


@dataclass
class Observation:
    steps: int = 0
    off: int = 0
    expected: list[float] = field(default_factory=list)  # min(measured, max_norm), per step
    applied: list[float] = field(default_factory=list)


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.last = None  # (params, norm_type, expected norm) of the last clip since the backward
        session.on(Event.CLIP, ID, self.on_clip)
        session.on(Event.BACKWARD, ID, self.on_backward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    def on_backward(self, loss) -> None:
        self.last = None

    def on_clip(self, params, max_norm, norm_type, total_norm) -> None:
        self.last = (params, norm_type, min(total_norm, max_norm))

    def on_update(self, update) -> None:
        last, self.last = self.last, None
        if last is None or update.manual:
            return
        params, norm_type, expected = last
        ids = {id(p) for p in update.params}
        if not any(id(p) in ids for p in params) or not expected == expected or expected == float("inf"):
            return
        norm = self.session.grad_norm(params, norm_type)
        if norm == 0.0:  # gradients reset between the clip and the step: weights-update's concern, not units
            return
        self.obs.steps += 1
        self.obs.expected.append(expected)
        self.obs.applied.append(norm)
        self.obs.off += abs(norm - expected) > RTOL * max(expected, 1e-12)

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.steps:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no optimizer step followed a clipping call")
    series = {"norm after clipping, per step": obs.expected, "norm applied, per step": obs.applied}
    measured, threshold = f"{obs.off} of {obs.steps} steps", f"relative difference <= {RTOL:g}"
    if obs.off:
        i = next(i for i, (e, a) in enumerate(zip(obs.expected, obs.applied)) if abs(a - e) > RTOL * max(e, 1e-12))
        e, a = obs.expected[i], obs.applied[i]
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"at {obs.off} of {obs.steps} steps the gradients applied did not have the norm the clip left "
                       f"them with: {a:.3g} applied, {e:.3g} after clipping (the clip measured gradients in other "
                       "units than the step applies)", series,
                       observed=f"the gradient norm at the update was {a:.3g} where clipping had left {e:.3g}")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   "every step applied the gradients with the norm the clip left them", series,
                   observed="the gradient norm at each update was the one clipping left")
