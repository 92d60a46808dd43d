"""loss-shapes: the loss compares each prediction with its own target, not with every target in the batch.

A model that outputs one value per example as a ``(B, 1)`` column, met by a target
of shape ``(B,)``, broadcasts: ``pred - y`` is a ``(B, B)`` grid of every prediction
against every target. A loss averaged over that grid still runs (``F.mse_loss``
only warns, and the warning can be silenced), but each prediction is pulled
towards the mean of all the batch's targets: the per-example gradient depends on
the other examples, and the model learns the average instead of the mapping.

Rule, two routes, both behavioural:

* (a) *Loss functions.* A training call (its input requires grad) of a loss that
  compares element by element (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``,
  ``huber_loss``, ``kl_div``, ``poisson_nll_loss``, ``gaussian_nll_loss``; the
  binary cross-entropies refuse mismatched shapes themselves) with a ``mean`` or
  ``sum`` reduction, whose input and target shapes differ and broadcast to more
  elements than either has. Every such call is a shape comparison (no host sync).
  One such call fails the probe: a reduced loss over a broadcast grid averages
  prediction-target pairs of different examples, which no correct script means.
  ``reduction="none"`` calls are left to route (b), which reads what they return.
* (b) *Hand-written losses.* For the first ``STEPS`` training steps, from the end
  of a model's forward (a top-level module call with gradients) to the backward
  call, a ``TorchFunctionMode`` watches every torch call (a loss module without
  parameters of its own, called in between, is watched inside too; a model's
  forward is not). An element-wise call of two tensors (``+ - * / **``, ``sub``,
  ``mul``, ``div``, ``pow``, ``where``, ``maximum``, ``xlogy`` ..., and the losses
  above with ``reduction="none"``) is a *cross-batch grid* when its result
  requires grad and has shape ``(n, n)`` with n >= 2, and among its tensor
  arguments one requires grad and one does not (a target), each with n elements,
  one laid out as ``(n, 1)`` and the other as ``(n,)`` / ``(1, n)``: each carries
  the n on an axis where the other has 1. A grid site (the function and the
  script's line that called it) *fails* when the backward pass reached the grid (a
  hook on it: the per-example gradient went through the cross terms), it was seen
  at ``MIN_STEPS`` (2) or more training steps, and its operand without gradient
  held different values at two of them (a target changes with the batch; a
  constant of the script does not). Four steps are enough: the shapes are the same
  at every step. The mode is pushed only on top of an empty stack (or of the
  default-device context, which keeps itself at the bottom) and popped only when
  it is on top, so a mode the script enters cannot pop ours or be popped by it.
  Cost: one Python call per torch call in those few windows (on the classifier
  reference about 1,400 calls, a few milliseconds), nothing afterwards.

The probe fails when a route fails. It cannot tell when a grid site was reached at
fewer than ``MIN_STEPS`` steps or its gradient-free operand never changed (the
same batch every step, or a fixed vector whose length equals the batch size);
when the training batches held a single example (``(1, 1)`` broadcasts to
nothing larger: the bug cannot show); or when no window could be watched and no
element-wise loss function was called (no ``nn.Module`` forward with gradients
before a backward; a script that uses ``torch.compile``, whose compiled code would
get a guard on the mode; another torch function mode active, which could pop
ours). It passes otherwise; n/a when nothing was backpropagated.

Why a correct script does not fail. Deliberate pairwise computations pair two
operands that both require grad (``z @ z.T`` is not element-wise; ``a[:, None] -
b[None, :]`` on embeddings that both come from the model) or neither (label masks
``y[:, None] == y[None, :]``), or combine a ``(B, B)`` matrix with another
``(B, B)`` or ``(B, 1)`` one (a contrastive loss's logits and masks): none pairs a
gradient-carrying n-vector with a gradient-free n-vector across axes. A pairwise
term against a detached copy of the same output (``s[:, None] - s.detach()``) is
skipped: its two operands hold equal values. Per-token losses pair ``(B, T)``
with ``(B, T)``. A fixed vector of thresholds or bin centres whose length
happens to equal the batch size is the same at every step, so it is at most a
cannot-tell. Evaluation is not judged (no backward reaches it). Not caught: a
hand-written loss computed inside the model's own forward (the window opens when
the forward returns), inside a loss module that has parameters of its own, or in
a script that compiles code; an evaluation metric that broadcasts the same way.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "loss-shapes"
TITLE = "the loss pairs each output with its own target"
SYMPTOM_ID, SYMPTOM = "loss-grid", "how many values the loss averages"

LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss")
ELEMENTWISE = frozenset({
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__pow__",
    "__rpow__", "add", "sub", "subtract", "rsub", "mul", "multiply", "div", "divide", "true_divide", "pow", "where",
    "maximum", "minimum", "fmax", "fmin", "xlogy", "atan2", "hypot", "squared_difference", *LOSSES})
STEPS = 4  # training steps watched from the model's output to the backward call
MIN_STEPS = 2  # steps a grid site must be seen (and its target change) at, to fail
MAX_WINDOWS = 32  # windows opened at most (forwards with gradients that no backward follows)
FRAMES = 2  # the script's frames that name a call site


@dataclass
class Observation:
    steps: int = 0  # training steps whose loss computation was watched
    batch: int | None = None  # the largest leading dimension of the inputs of the forwards watched after
    unwatched: str = ""  # why a window could not be opened, if one could not
    loss_calls: int = 0  # training calls of the element-wise loss functions
    losses: list[dict] = field(default_factory=list)  # route (a): {"kind", "where", "input", "target", "shape", "calls"}
    grids: list[dict] = field(default_factory=list)  # route (b): {"op", "where", "grad", "other", "shape", "steps",
    # "reached", "varied"}


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.losses: dict[tuple, dict] = {}
        self.grids: dict[tuple, dict] = {}
        self._mode = None
        self._armed = False
        self._windows = 0
        self._skip: tuple[str, ...] | None = None
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.FORWARD_END, ID, self.on_forward_end)
        session.on(Event.BACKWARD, ID, self.on_backward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.LOSS, ID, self.on_loss)

    # -- route (a): the loss functions ------------------------------------------
    def on_loss(self, call) -> None:
        if call.kind not in LOSSES or not getattr(call.input, "requires_grad", False) or call.reduction == "none":
            return
        import torch

        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            return
        self.obs.loss_calls += 1
        if x.shape == y.shape:
            return
        try:
            shape = torch.broadcast_shapes(x.shape, y.shape)
        except RuntimeError:
            return
        if shape.numel() <= max(x.numel(), y.numel()):
            return
        key = (call.kind, tuple(x.shape), tuple(y.shape))
        site = self.losses.get(key)
        if site is None:
            site = self.losses[key] = {"kind": call.kind, "where": list(self._where()), "input": list(x.shape),
                                       "target": list(y.shape), "shape": list(shape), "calls": 0}
        site["calls"] += 1

    # -- route (b): the window from a model's output to the backward call ------------
    def on_forward(self, forward) -> None:
        if self._mode is None or not self._on_stack():
            return
        module = forward.ref() if forward.ref is not None else None
        if module is not None and next(iter(module.parameters()), None) is None:
            return  # a loss module without parameters: its computation is part of the loss
        self._armed = False
        self._pop()

    def on_forward_end(self, forward, output) -> None:
        import torch

        if self.obs.steps >= STEPS or self._windows >= MAX_WINDOWS:
            self._pop()
            return
        if not forward.grad or not torch.is_grad_enabled():
            return
        from checker.tensors import tensors_in

        if not any(t.requires_grad for t in tensors_in(output)):
            return
        if compiles():
            self.obs.unwatched = "the script compiles code (torch.compile)"
            return
        if not self._push():
            return
        self._armed = True
        self._windows += 1
        if forward.batch is not None:
            self.obs.batch = max(self.obs.batch or 0, forward.batch)

    def on_backward(self, loss) -> None:
        if self._armed:
            self._armed = False
            self.obs.steps += 1
        self._pop()

    def on_update(self, update) -> None:
        self._pop()

    def _on_stack(self) -> bool:
        import torch

        return any(torch._C._get_function_stack_at(i) is self._mode for i in range(torch._C._len_torch_function_stack()))

    def _push(self) -> bool:
        """Put the watching mode on top of torch's function-mode stack, where only a default-device context (which
        keeps itself at the bottom) may be below it: a mode the script entered could otherwise pop ours for its own."""
        import torch
        from torch.utils._device import DeviceContext

        if self._mode is None:
            self._mode = watching_mode(self)
        stack = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
        if stack and stack[-1] is self._mode:
            return True
        if any(m is self._mode or not isinstance(m, DeviceContext) for m in stack):
            self.obs.unwatched = "another torch function mode was active"
            return False
        torch._C._push_on_torch_function_stack(self._mode)
        return True

    def _pop(self) -> None:
        """Take the mode off the stack when it is on top; otherwise (a mode the script entered is above it, or torch
        set it aside while it handles a call) it stays, passing calls through, until a later event."""
        import torch

        n = torch._C._len_torch_function_stack()
        if self._mode is not None and n and torch._C._get_function_stack_at(n - 1) is self._mode:
            torch._C._pop_torch_function_stack()

    def seen(self, func, args: tuple, kwargs: dict, out) -> None:
        """A call inside a window returned ``out``: is it a cross-batch grid (see the module docstring)?"""
        import torch

        n = out.shape[0]
        if n < 2 or out.shape[1] != n:
            return
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.numel() == n]
        for a in tensors:
            if not a.requires_grad:
                continue
            for b in tensors:
                if not b.requires_grad and crossing(a.shape, b.shape, n):
                    self._grid(func, a, b, out)
                    return

    def _grid(self, func, a, b, out) -> None:
        import torch

        values = b.detach().reshape(-1)
        if torch.equal(a.detach().reshape(-1).to(values.dtype), values):
            return  # a pairwise term against a detached copy of the same output
        name = getattr(func, "__name__", str(func))
        key = (name, self._where())
        site = self.grids.get(key)
        if site is None:
            site = self.grids[key] = {"op": name, "where": list(key[1]), "grad": list(a.shape), "other": list(b.shape),
                                      "shape": list(out.shape), "steps": 0, "reached": False, "varied": False,
                                      "values": values.clone(), "window": None}
        elif not site["varied"] and site["window"] != self.obs.steps:
            site["varied"] = site["values"].shape != values.shape or not torch.equal(site["values"], values)
        if site["window"] != self.obs.steps:
            site["window"] = self.obs.steps
            site["steps"] += 1
        if not site["reached"]:
            out.register_hook(lambda grad: site.__setitem__("reached", True))

    def _where(self) -> tuple[str, ...]:
        """The script's lines that led here: the caller, then its caller (torch and the checker left out)."""
        if self._skip is None:
            import torch

            checker = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            self._skip = (os.path.dirname(torch.__file__) + os.sep, checker + os.sep)
        frame, found = sys._getframe(1), []
        while frame is not None and len(found) < FRAMES:
            filename = frame.f_code.co_filename
            if not filename.startswith(self._skip) and not filename.startswith("<frozen"):
                found.append(f"{os.path.basename(filename)}:{frame.f_lineno}")
                if frame.f_code.co_name == "<module>":
                    break
            frame = frame.f_back
        return tuple(found)

    def summary(self) -> Observation:
        self._armed = False
        self._pop()
        self.obs.losses = list(self.losses.values())
        self.obs.grids = [{k: v for k, v in s.items() if k not in ("values", "window")} for s in self.grids.values()]
        return self.obs


def watching_mode(observer: Observer):
    """A torch function mode that hands each element-wise call made while ``observer`` is armed to it."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Watching(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if torch.compiler.is_compiling() or not observer._armed:
                return out
            if getattr(func, "__name__", None) in ELEMENTWISE and isinstance(out, torch.Tensor) and out.dim() == 2 \
                    and out.requires_grad:
                try:
                    observer.seen(func, args, kwargs, out)
                except Exception as exc:  # a probe's bug must never break the user's script
                    observer._armed = False
                    observer.session.errors.setdefault(ID, f"{type(exc).__name__}: {exc}")
            return out

    return Watching()


def compiles() -> bool:
    """Whether the script made something to compile (``torch.compile``): dynamo then holds a compiler backend. Only
    once the real ``torch._dynamo`` replaced the checked process's stand-in (:mod:`checker.fast_start`); code that
    merely disables dynamo (activation checkpointing) holds none. A mode on the stack while compiled code runs would
    add a guard to it."""
    from checker import fast_start

    if fast_start._real() is None:
        return False
    try:
        from torch._dynamo.eval_frame import cached_backends
    except ImportError:  # another torch: assume the worst
        return True
    return any(backend is not None for backend in list(cached_backends.values()))


def crossing(a: tuple, b: tuple, n: int) -> bool:
    """Shapes of n elements each, one laid out as a column ``(n, 1)`` and the other as a row (``(n,)``, ``(1, n)``)."""
    if len(a) > 2 or len(b) > 2:
        return False
    a, b = (1,) * (2 - len(a)) + tuple(a), (1,) * (2 - len(b)) + tuple(b)
    return {a, b} == {(n, 1), (1, n)}


# -- the judge ---------------------------------------------------------------------


def _place(site: dict) -> str:
    where = site["where"]
    if not where:
        return "(called from outside the script)"
    return f"at {where[0]}" + (f" (called from {where[1]})" if len(where) > 1 else "")


def _shape(shape: list) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def numel(shape: list) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


def _grid_seen(site: dict) -> str:
    n = site["shape"][0]
    return (f"at {site['steps']} training step(s) the loss was computed through {n * n} values made from {n} model "
            f"outputs and {n} values without gradient, and the backward pass went through all of them")


def fails(site: dict) -> bool:
    return site["reached"] and site["steps"] >= MIN_STEPS and site["varied"]


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not facts.backwards:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no backward pass: nothing was trained",
                       observed="no backward pass: nothing was trained")
    if obs.losses:
        site = max(obs.losses, key=lambda s: s["calls"])
        size, given = numel(site["shape"]), max(numel(site["input"]), numel(site["target"]))
        seen = f"at {site['calls']} training call(s) the loss averaged {size} values, where its inputs held {given}"
        return Finding(ID, TITLE, FAIL, f"{size} values from {given}", f"{given}",
                       f"{site['kind']} {_place(site)} got an input of shape {_shape(site['input'])} and a target of "
                       f"shape {_shape(site['target'])}, which broadcast to {_shape(site['shape'])}: every prediction is "
                       "compared with every target of the batch, so each one is pulled towards the batch's mean "
                       "target. Give both the same shape (squeeze the model's trailing dimension of 1, or unsqueeze "
                       "the target)", observed=seen)
    reached = [s for s in obs.grids if s["reached"]]
    failing = [s for s in reached if fails(s)]
    if failing:
        site = failing[0]
        n = site["shape"][0]
        return Finding(ID, TITLE, FAIL, f"{n * n} values from {n}", f"{n}",
                       f"`{site['op']}` {_place(site)} combined an output of shape {_shape(site['grad'])} with a "
                       f"target of shape {_shape(site['other'])}, which broadcast to {n} × {n}, and the loss "
                       "backpropagated through that grid: every prediction is compared with every target of the "
                       "batch, so each example's gradient depends on the others' targets and the model learns their "
                       "mean. Give both the same shape (squeeze the model's trailing dimension of 1, or unsqueeze "
                       "the target)", observed=_grid_seen(site))
    if reached:
        site = reached[0]
        why = (f"it was seen at only {site['steps']} step(s) (at least {MIN_STEPS} needed)" if site["steps"] < MIN_STEPS
               else "the values without gradient were the same at every step (a fixed vector, or the same batch)")
        n = site["shape"][0]
        return Finding(ID, TITLE, CANNOT_TELL, f"{n * n} values from {n}", f"{n}",
                       f"`{site['op']}` {_place(site)} built a {n} × {n} grid from an output of shape "
                       f"{_shape(site['grad'])} and values without gradient of shape {_shape(site['other'])}, and the "
                       f"loss backpropagated through it; but {why}",
                       observed=f"{_grid_seen(site)}; but {why}")
    if not obs.steps and not obs.loss_calls:
        why = obs.unwatched or "no nn.Module forward ran with gradients before a backward pass"
        return Finding(ID, TITLE, CANNOT_TELL, message=f"the computation of the loss could not be watched: {why}",
                       observed=f"the computation of the loss could not be watched: {why}")
    if obs.batch is not None and obs.batch < 2:
        return Finding(ID, TITLE, CANNOT_TELL, "batch of 1", "at least 2",
                       "the training batches held a single example, where a mismatch of shapes cannot show",
                       observed="the training batches held a single example")
    watched = []
    if obs.steps:
        watched.append(f"{obs.steps} training step(s) watched from the model's output to the backward call")
    if obs.loss_calls:
        watched.append(f"{obs.loss_calls} call(s) of element-wise loss functions")
    return Finding(ID, TITLE, PASS, "0 grids", "0",
                   f"the loss paired each output with its own target: {' and '.join(watched)}",
                   observed="the loss averaged one value per example (or per element), never a grid across the batch")
