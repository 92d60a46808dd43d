"""inner-steps: an inner gradient step never lands in the weights an optimizer trains.

MAML and its relatives adapt a copy of the weights (fast weights, a cloned model) to each task and leave the
meta-parameters for the optimizer to move. An inner step written in place on the meta-parameters
(``p.data -= lr * g``, or under ``torch.no_grad()``) changes them behind the optimizer's back: every task's
adaptation piles up in the weights the meta-update starts from, an evaluation that adapts to its tasks trains
the model on them, and autograd cannot see any of it (``.data`` bypasses its version check).

Rule: for each ``torch.autograd.grad`` call with respect to parameters an optimizer was given, or to fast weights
and copies made from them (the gradient is then held against the parameter they come from; in the first 16
stretches from one optimizer step to the next that have such calls, then one in 8), a fixed sample
of up to 64 elements of each parameter and of its gradient is kept; at the next ``autograd.grad`` call, backward
pass or optimizer step, the parameter's sample is read again. A change proportional to the gradient, downhill
(``-c · g``, c > 0, to 1 % of its size beyond rounding) is an inner step written in place. At the optimizer's
next step (and at the end of the run), each parameter that took one is compared with its value when the window's
first gradient was taken:

* fail: an in-place inner step was still in the weights when the optimizer stepped, or when the run ended (it
  was not undone);
* pass: gradients were taken of trained parameters and none of them moved the parameters outside the
  optimizer, or every in-place step was undone before the update (a state restored from a copy);
* not applicable: no ``torch.autograd.grad`` call with respect to trained parameters.

Measured: the ``meta`` reference moves fast weights, never the parameters: 0 in-place steps; with the inner
step written as ``p.data -= lr * g``: every inner step is one, and persists (fail). Why a correct script cannot
fail: a step the optimizer makes happens after the check at its pre-hook; a projection (weight clipping, a
max-norm rescale) is not proportional to the gradient; a perturbation up the gradient (sharpness-aware
minimisation) is uphill and restored. Limits: a manual step that is not plain gradient descent (momentum, Adam
written by hand) is not recognised; parameters of an optimizer built after the gradient was taken are not seen.
Cost: none where the script never calls ``torch.autograd.grad`` on trained parameters; else, in the stretches
checked, two gathers of 64 elements per parameter per call.
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.fast_weights import OWNER, TrainedParams, root_param
from checker.probes._shared.samples import indices, sample

ID = "inner-steps"
TITLE = "inner steps leave the trained weights alone"
SYMPTOM_ID, SYMPTOM = "weights-between-updates", "the trained weights between the optimizer's updates"
PROPORTIONAL = 0.01  # a change within this share of its size of -c × the gradient is a gradient step
ROUNDING = 4  # ... beyond this many units of rounding of the parameter's values
FIRST_WINDOWS, EVERY = 16, 8  # windows (from one update to the next) checked: the first ones, then one in EVERY
USES = (OWNER,)


@dataclass
class Observation:
    calls: int = 0  # autograd.grad calls with respect to trained parameters (or tensors made from them), checked
    windows: int = 0  # stretches from one update to the next with such calls
    written: int = 0  # in-place gradient steps seen on trained parameters
    updates: int = 0  # optimizer steps (and the run's end) at which such steps were checked
    persisted: int = 0  # ... where a stepped parameter still held them
    restored: int = 0  # ... where every stepped parameter was back to its value before them
    example: str = ""  # the first persisted one: which parameter, how far


class Observer:
    def __init__(self, session):
        import weakref

        self.obs = Observation()
        self.ref = weakref.ref
        self.trained = session.shared(TrainedParams)
        self.pending: dict[int, tuple] = {}  # id -> (param ref, indices, values, gradient) awaiting a re-read
        self.before: dict[int, tuple] = {}  # id -> (param ref, indices, values when the window began)
        self.stepped: set[int] = set()  # parameters that took an in-place gradient step since the last update
        self.judging: bool | None = None  # whether this window is checked (None: no call in it yet)
        session.on(Event.AUTOGRAD_GRAD, ID, self.on_grad)
        session.on(Event.BACKWARD, ID, self.reread)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    def on_grad(self, inputs, grads) -> None:
        if self.judging is False:
            return
        self.reread()
        counted = False
        for tensor, grad in zip(inputs, grads):
            param = root_param(tensor, self.trained, copies=True) \
                if grad is not None and getattr(tensor, "requires_grad", False) else None
            if param is None:
                continue
            if self.judging is None:
                self.obs.windows += 1
                self.judging = self.obs.windows <= FIRST_WINDOWS or self.obs.windows % EVERY == 0
                if not self.judging:
                    return
            counted = True
            if not sampled(param) or grad.shape != param.shape:
                continue
            index = indices(param)
            values = sample(param, index)
            self.pending[id(param)] = (self.ref(param), index, values, sample(grad, index))
            self.before.setdefault(id(param), (self.ref(param), index, values))
        self.obs.calls += counted

    def reread(self, *args) -> None:
        for key, (ref, index, values, grad) in list(self.pending.items()):
            param = ref()
            del self.pending[key]
            if param is not None and descent(values, sample(param, index), grad, param.dtype):
                self.obs.written += 1
                self.stepped.add(key)

    def on_update(self, update) -> None:
        """At an optimizer step (and at the end of the run, ``update`` None): are this window's in-place steps
        still in the weights?"""
        self.reread()
        if self.stepped:
            self.obs.updates += 1
            persisted = []
            for key in self.stepped:
                ref, index, values = self.before[key]
                param = ref()
                if param is not None and not bool((sample(param, index) == values).all()):
                    persisted.append(param)
            if persisted:
                self.obs.persisted += 1
                if not self.obs.example:
                    self.obs.example = (f"{len(persisted)} of {len(self.stepped)} stepped parameters (the first of "
                                        f"shape {tuple(persisted[0].shape)}) still held the inner steps")
            else:
                self.obs.restored += 1
        self.before.clear()
        self.stepped.clear()
        self.judging = None

    def summary(self) -> Observation:
        self.on_update(None)  # steps written after the last update (a final evaluation) stay in the weights too
        return self.obs


def sampled(param) -> bool:
    import torch

    return param.layout == torch.strided and param.is_floating_point() and param.numel() > 0 \
        and param.device.type != "meta"


def descent(before, after, grad, dtype) -> bool:
    """``after - before`` is ``-c · grad`` for some c > 0, to PROPORTIONAL of its size beyond rounding."""
    import torch

    change = after - before
    size = float(change.norm())
    rounding = ROUNDING * torch.finfo(dtype).eps * float(torch.maximum(before.abs(), after.abs()).norm())
    weight = float(grad.dot(grad))
    if size <= rounding or weight == 0.0:
        return False
    c = -float(change.dot(grad)) / weight
    return c > 0 and float((change + c * grad).norm()) <= PROPORTIONAL * size + rounding


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.calls:
        why = "no gradient was taken with torch.autograd.grad with respect to parameters an optimizer trains"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.persisted:
        measured = f"{obs.persisted} of {obs.updates} updates"
        return Finding(ID, TITLE, FAIL, measured, "0",
                       f"{obs.written} gradient steps from torch.autograd.grad were written straight into parameters "
                       f"the optimizer trains, and at {obs.persisted} of the {obs.updates} updates (or the run's end) "
                       f"that followed they were still there ({obs.example}): the inner steps change the "
                       "meta-parameters in place (through .data or under no_grad, where autograd cannot see them), so "
                       "every task's adaptation piles up in the weights the optimizer starts from. Adapt fast weights "
                       "(p - lr * g) or a copy instead",
                       observed=f"between the optimizer's updates the trained weights moved {obs.written} times by "
                                f"downhill steps along the gradients the script took, and at {obs.persisted} of "
                                f"{obs.updates} updates (or the run's end) those moves were still in them")
    if obs.written:
        text = (f"{obs.written} gradient steps were written into trained parameters and undone before each of the "
                f"{obs.updates} updates (or the run's end) that followed")
        return Finding(ID, TITLE, PASS, f"0 of {obs.updates} updates", "0", text, observed=text)
    text = (f"{obs.calls} torch.autograd.grad calls checked took gradients of trained parameters (or of tensors made "
            "from them); none moved the parameters outside the optimizer")
    return Finding(ID, TITLE, PASS, "0 steps", "0", text, observed=text)
