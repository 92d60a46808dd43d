"""grad-check: the gradient autograd computes is the slope of the function the forward pass computed.

An edit autograd does not see (``h.data.mul_(s)``, an in-place change under
``no_grad``) changes the forward's values and leaves the gradient as if it had not
happened: nothing fails, training runs, on the gradient of some other function.

Rule. Once, early in training (at the first update, or at the second backward pass
when no update came first; at the end of the run at the latest), the probe takes the
latest forward of a top-level module that a backward pass reached and that has
parameters requiring grad, with the positional and keyword arguments it received. A
deep copy of that module, in float64 and eval mode (dropout off, batch-norm on its
running statistics), is fed the first 4 samples of those arguments (every tensor whose
leading dimension is the batch's; all of them if that forward fails), floating tensors
in float64, integer ones (token ids) as they are. With ``f(θ) = Σ <output, R>`` (R a
fixed random projection), it compares autograd's slope ``∇f·v`` with the central
difference ``(f(θ + εv) - f(θ - εv)) / 2ε`` along a direction v over the copy's
parameters that receive a gradient (those whose gradient is None are left out: a
branch cut off the graph is gradient-flow's business). Per parameter tensor, v is the
unit sum of a random direction and the tensor's gradient direction, weighted so that
every tensor adds as much to the slope: a wrong gradient in one small tensor (an
embedding) is not drowned by the others, and a random direction alone can be nearly
orthogonal to the error. ε moves no tensor by more than 1e-6 of its norm. When the
relative difference exceeds 1e-6, the difference is taken again with ε / 100.

* pass: autograd agrees with either central difference within 1e-6 (relative);
* fail: it differs from them by more than 1e-3 while the two central differences agree
  with each other 100 times better, and so do the one-sided differences
  ``(f(θ + εv) - f(θ)) / ε`` and ``(f(θ) - f(θ - εv)) / ε`` at the smaller ε (the
  function is smooth and repeatable there: autograd is the odd one out);
* cannot tell otherwise, with what stood in the way (below).

Measured: on every reference, corpus script and fixture without this bug or a detach,
autograd and the first difference agree to better than 1e-8 (at most 3.3e-9, with
inputs in the hundreds; at most 1.6e-10 over 20 seeds on the classifier reference).
The classifier with its scaled sum edited through ``.data`` differs by 0.37 at every
seed, the corpus transformer with its embedding scale edited so by 0.24 (along a plain
random direction: 2e-4 to 3e-3, hence the weighting), the broken fixtures by 0.37 to
0.5; where a detach cuts a branch off, by 0.04 (cannot tell: the detach was seen).

Why a correct script does not fail. In float64, with steps a millionth of each
tensor's size, the central difference of a smooth function agrees with its derivative
to about 1e-10. A ReLU or max kink crossed between θ - εv and θ + εv shows as central
differences that change with ε; a kink at θ itself (a pre-activation exactly 0) as
one-sided differences that disagree; a forward that keeps state or draws randomness
that is not reseeded likewise: each makes the probe say it cannot tell. Randomness
that is reseeded is pinned: each forward of the copy starts from the same seed (a
``F.dropout(training=True)`` draws the same mask each time). A forward computed in
lower precision shows as unsettled differences too. Tensors the forward builds
itself (a causal mask) are float64 like the copy: the default dtype is float64 while the
copy runs, for a float32 additive mask on float64 attention gets gradients off by 0.46
from PyTorch's kernel (fixture grad_check__causal_mask, the lm reference). Gradient surgery that makes
autograd differ from the forward on purpose (a straight-through estimator
``x + (q - x).detach()``, a gradient-reversal ``autograd.Function``, a
``register_hook`` in the forward, ``no_grad``, ``.data`` or ``.item()`` inside it) is
seen while the copy runs (a ``TorchFunctionMode``, and a walk of the copy's graph for
custom Functions): a disagreement then says it cannot tell, unless an in-place edit of
a tensor of the graph through ``.data`` / ``.detach()``, or under ``no_grad``, was
seen too, which is this bug's mechanism observed at run time.

Not applicable when no top-level module's forward was reached by a backward pass (or
none that has a parameter requiring grad). Cannot tell, with the reason, when the model
cannot be deep-copied or converted to float64, is compiled, its forward fails on the
copy, nothing in its output depends on its parameters or changes along v, or the
values are not finite. Not seen: a bug on a path the model takes only in train mode.

The check never disturbs the run: the copy runs with the RNG forked (CPU, the model's
GPU, Python's and NumPy's), autocast off, every module hook (the checker's and the
script's global ones) and the session's events muted, and the copy's own module hooks
removed; the model, its modes, the optimizer and the script's random streams are
untouched. Cost: one deep copy, three forwards of 4 samples and one backward, once per
run (two more forwards when the first difference disagrees): 15 ms of CPU on the
classifier reference; until then, one call per module call to keep the latest training
forwards' arguments.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.replay import copy_of, forked_rng, quiet

ID = "grad-check"
TITLE = "gradients match the forward pass"
SYMPTOM_ID, SYMPTOM = "slope-check", "the output's slope along a random direction, by autograd and by finite differences"

SAMPLES = 4  # samples of the batch fed to the copy
STEP = 1e-6  # ε moves no parameter tensor by more than this fraction of its norm
SMALLER = 100  # the second ε is ε / SMALLER
AGREE = 1e-6  # relative difference under which autograd and a finite difference agree
DISAGREE = 1e-3  # ... above which they disagree (when nothing else explains it)
STABLE = 0.01  # the two central differences must agree this much better than autograd agrees with them
KINK = 0.01  # one-sided differences further apart than this fraction of the discrepancy: a kink at these weights,
# or a forward that is not repeatable, could explain it
FLAT = 1e-12  # a change of f along εv below this fraction of |f|: the output does not depend on the direction
KEPT = 4  # recent training forwards whose arguments are kept until the check
ATTEMPTS = 8  # updates or backward passes at which a check is tried
SEED = 20240917
TINY = 1e-300  # a norm below this is zero
MAX_NODES = 100_000  # autograd graph nodes walked to find custom Functions
READS_OUT = {"item", "tolist", "numpy", "__float__", "__int__"}  # values taken out of the graph
IN_PLACE_OPERATORS = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
                      "__ipow__", "__imatmul__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}


@dataclass
class Observation:
    model: str = ""  # class name of the module checked; "" when no training forward was found
    problem: str = ""  # why the check could not run
    samples: int = 0  # leading dimension of the copy's input
    tensors: int = 0  # parameter tensors in the direction
    value: float | None = None  # f(θ)
    slope: float | None = None  # autograd's ∇f·v
    steps: list[float] = field(default_factory=list)  # ε of each finite difference
    differences: list[float] = field(default_factory=list)  # (f(θ + εv) - f(θ - εv)) / 2ε at each ε
    gaps: list[float] = field(default_factory=list)  # |forward - backward difference| at each ε, over |slope|
    surgery: list[str] = field(default_factory=list)  # gradient surgery seen in the copy's forward
    hidden_edits: list[str] = field(default_factory=list)  # in-place edits of graph tensors autograd did not see


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self._compiling = torch.compiler.is_compiling
        self.obs = Observation()
        self.done = False
        self.attempts = 0
        self._pending = None  # the top-level forward running now, whose arguments are due
        self._kept: dict[int, tuple[Any, tuple, dict]] = {}  # forward index -> (forward, args, kwargs)
        self._handle = session.patches.forward_hook(ID, self._after, with_kwargs=True)
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.BACKWARD, ID, self.on_backward)

    # -- keeping the arguments of training forwards ------------------------------
    def on_forward(self, forward) -> None:
        self._pending = forward if forward.grad and not self.done else None

    def _after(self, module, args, kwargs, output) -> None:
        if self._compiling():  # inside code torch.compile traces: call through, adding no guards
            return
        pending = self._pending
        if pending is not None and pending.ref() is module:
            self._pending = None
            self._kept[pending.index] = (pending, args, kwargs)
            while len(self._kept) > KEPT:
                self._kept.pop(next(iter(self._kept)))

    # -- when to check --------------------------------------------------------------
    def on_update(self, update) -> None:
        self._try()

    def on_backward(self, loss) -> None:
        if self.session.backwards >= 2:  # an earlier backward pass has run: its forwards are known to be training
            self._try()

    def _try(self) -> None:
        """Check the latest training forward of a module with trainable parameters, once one is known."""
        if self.done or self.session.forward is not None:
            return
        self.attempts += 1
        reached = [(m, a, k) for f, a, k in reversed(self._kept.values()) if f.reached and (m := f.ref()) is not None]
        chosen = next(((m, a, k) for m, a, k in reached if trainable(m)), None)
        if chosen is None and self.attempts < ATTEMPTS:
            return
        self._finish()
        if chosen is not None:
            self.obs = check(self.session, *chosen)
        elif reached:
            self.obs.problem = "the modules whose forwards a backward pass reached have no parameter that requires grad"

    def _finish(self) -> None:
        self.done = True
        self._pending = None
        self._kept.clear()
        self.session.patches.remove(self._handle)

    def summary(self) -> Observation:
        if not self.done:
            self.attempts = ATTEMPTS
            self._try()
        if not self.done:
            self._finish()
        return self.obs


def trainable(module) -> bool:
    return any(p.requires_grad for p in module.parameters())


# -- the check ----------------------------------------------------------------------


def check(session, module, args: tuple, kwargs: dict) -> Observation:
    """Compare autograd's slope with finite differences on a float64 copy of ``module``."""
    import torch

    obs = Observation(model=type(module).__name__)
    if type(module).__name__ in ("DataParallel", "DistributedDataParallel"):
        module = module.module
    if type(module).__name__ == "OptimizedModule":
        obs.problem = "the model is compiled (torch.compile): an eager copy would not run the code that trained"
        return obs
    if any(p.is_complex() for p in module.parameters()):
        obs.problem = "the model has complex parameters: a slope along a real direction would not be their gradient"
        return obs
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    with quiet(session), forked_rng(device), torch.inference_mode(False), torch.enable_grad(), \
            torch.autocast("cpu", enabled=False), \
            (torch.autocast("cuda", enabled=False) if device.type == "cuda" else contextlib.nullcontext()):
        try:
            twin = copy_of(module, torch.float64)
        except Exception as exc:
            obs.problem = f"the model could not be copied and converted to float64 ({type(exc).__name__}: {exc})"
            return obs
        try:
            measure(twin, args, kwargs, obs)
        except Exception as exc:  # the copy's own backward, say: said, never a probe error
            obs.problem = f"the check failed on the copy ({type(exc).__name__}: {exc})"
    return obs


def measure(twin, args: tuple, kwargs: dict, obs: Observation) -> None:
    """Fill ``obs`` with the slopes of the copy's output: autograd's, then central differences."""
    import torch

    params = [p for p in twin.parameters() if p.requires_grad]
    watch = SurgeryWatch()
    full = inputs_of(args, kwargs, None)
    batch = inputs_of(args, kwargs, SAMPLES)
    output, used = None, None
    for inputs in ([batch, full] if batch is not None else [full]):
        watch.reset()
        try:
            with watch.mode():
                output = run(twin, inputs)
            used = inputs
            break
        except Exception as exc:
            obs.problem = f"the model's forward failed on a float64 copy ({type(exc).__name__}: {exc})"
    if used is None:
        return
    obs.problem = ""
    obs.samples = leading(used)
    generator = torch.Generator().manual_seed(SEED)
    outputs = [t for t in tensors(output) if t.is_floating_point() and t.requires_grad]
    if not outputs:
        obs.problem = "no floating-point output of the copy depends on its parameters"
        return
    projections = [torch.randn(t.shape, generator=generator, dtype=torch.float64).to(t.device) for t in outputs]
    value = sum((t.double() * r).sum() for t, r in zip(outputs, projections))
    obs.surgery = watch.surgery + custom_functions(value)
    obs.hidden_edits = watch.hidden
    grads = torch.autograd.grad(value, params, allow_unused=True)
    used_params = [(p, g.to_dense() if g.is_sparse else g) for p, g in zip(params, grads) if g is not None]
    obs.tensors = len(used_params)
    if not used_params:
        obs.problem = "no parameter of the copy received a gradient"
        return
    direction, eps = direction_of(used_params, generator, constant_rows(twin))
    base = [p.detach().clone() for p, _ in used_params]
    f0, slope = (float(x) for x in torch.stack([value.detach(), sum((g * v).sum() for (_, g), v in
                                                                       zip(used_params, direction))]).tolist())
    obs.value, obs.slope = f0, slope
    if not (math.isfinite(f0) and math.isfinite(slope)):
        obs.problem = "the copy's output or its gradient is not finite at these weights"
        return
    for _ in range(2):
        values = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for (p, _), b, v in zip(used_params, base, direction):
                    p.copy_(b).add_(v, alpha=sign * eps)
            values.append(float(sum((t.double() * r).sum() for t, r in
                                    zip(floating(run(twin, used)), projections)).detach()))
        with torch.no_grad():
            for (p, _), b in zip(used_params, base):
                p.copy_(b)
        difference = (values[0] - values[1]) / (2 * eps)
        obs.steps.append(eps)
        obs.differences.append(difference)
        scale = max(abs(slope), abs(difference))
        obs.gaps.append(abs(values[0] + values[1] - 2 * f0) / eps / scale if scale > 0 else 0.0)
        if not math.isfinite(difference):
            obs.problem = "the copy's output is not finite at weights near these"
            return
        if relative(slope, difference) <= AGREE:
            break
        eps /= SMALLER


def constant_rows(twin) -> dict[int, int]:
    """``id(weight) -> row`` for each embedding's ``padding_idx`` row: autograd gives that row no gradient by design (it is
    a constant of the model, not a parameter of the function), while the outputs at padded positions still read it, so a
    step along it would move the forward with autograd's slope at zero. The direction leaves those rows alone."""
    import torch.nn as nn

    return {id(m.weight): m.padding_idx for m in twin.modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.padding_idx is not None}


def direction_of(used_params: list, generator, constant: dict[int, int] | None = None) -> tuple[list, float]:
    """The direction v and the step ε. Per parameter tensor, the unit sum of a random unit direction and the tensor's
    gradient direction, weighted so that every tensor adds as much to autograd's slope (a wrong gradient in one small
    tensor, an embedding, is not drowned by the others; no weight above 100 times the median's); ε moves no tensor by
    more than STEP of its norm (a tensor of zeros: of the typical parameter's size)."""
    import torch

    randoms = [torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p.device) for p, _ in used_params]
    for r, (p, _) in zip(randoms, used_params):
        if id(p) in (constant or {}):
            r[constant[id(p)]] = 0.0
    norms = torch.stack([torch.stack([r.norm(), g.norm()]) for r, (_, g) in zip(randoms, used_params)]).tolist()
    units = [r / max(rn, TINY) + g / max(gn, TINY) for r, (_, g), (rn, gn) in zip(randoms, used_params, norms)]
    units = [u / max(n, TINY) for u, n in zip(units, torch.stack([u.norm() for u in units]).tolist())]
    votes = [abs(v) for v in torch.stack([g.mul(u).sum() for (_, g), u in zip(used_params, units)]).tolist()]
    median = sorted(votes)[len(votes) // 2]
    direction = [u / max(v, median / 100, TINY) for u, v in zip(units, votes)] if median > 0 else units
    sizes = torch.stack([p.detach().norm() for p, _ in used_params]).tolist()
    lengths = torch.stack([d.norm() for d in direction]).tolist()
    count = sum(p.numel() for p, _ in used_params)
    typical = math.sqrt(sum(n * n for n in sizes) / count) if count else 0.0
    steps = [STEP * max(n, typical * math.sqrt(p.numel())) / length
             for (p, _), n, length in zip(used_params, sizes, lengths) if length > 0]
    return direction, (min(steps) if steps and min(steps) > 0 else STEP)


def run(twin, inputs: tuple[tuple, dict]):
    """One forward of the copy, from the same seed each time, with float64 as the default dtype: a tensor the forward
    builds itself (a causal mask from ``generate_square_subsequent_mask``, positions) is float64 like the copy, as it
    was float32 like the script's model. (A float32 additive ``attn_mask`` on float64 attention gives gradients that
    differ from the forward's slope by 3e-2 to 0.7 for sequences of 8 or more: a PyTorch kernel's doing, not the
    script's.)"""
    import torch

    torch.default_generator.manual_seed(SEED)
    device = next((p.device for p in twin.parameters()), None)
    if device is not None and device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(SEED)
    args, kwargs = inputs
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return twin(*args, **kwargs)
    finally:
        torch.set_default_dtype(default)


def floating(output) -> list:
    return [t for t in tensors(output) if t.is_floating_point() and t.requires_grad]


def tensors(value) -> list:
    from checker.tensors import tensors_in

    return tensors_in(value)


def inputs_of(args: tuple, kwargs: dict, samples: int | None) -> tuple[tuple, dict] | None:
    """The forward's arguments, detached and in float64 (floating tensors); with ``samples``, every tensor whose
    leading dimension is the batch's cut to its first ``samples`` (None when nothing would be cut)."""
    import torch

    from checker import tensors as kinds

    found = tensors((args, kwargs))
    if samples is not None and not all(kinds.plain(t) for t in found):
        return None  # a sparse adjacency, a nested batch: rows that cannot be cut, or whose cut changes the graph
    first = next((t for t in found if t.dim() >= 1), None)
    size = kinds.leading(first) if first is not None else None
    if samples is not None and (size is None or size <= samples):
        return None

    def convert(value):
        if isinstance(value, torch.Tensor):
            t = value.detach()
            if samples is not None and t.dim() >= 1 and t.shape[0] == size:
                t = t[:samples]
            return t.to(torch.float64) if t.is_floating_point() else t
        if isinstance(value, (tuple, list)):
            return type(value)(convert(v) for v in value) if type(value) in (tuple, list) else value
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


def leading(inputs: tuple[tuple, dict]) -> int:
    from checker import tensors as kinds

    first = next((t for t in tensors(inputs) if t.dim() >= 1), None)
    return (kinds.leading(first) or 0) if first is not None else 0


def unit(vectors: list) -> list:
    import torch

    norm = torch.sqrt(sum(v.pow(2).sum() for v in vectors))
    return [v / norm for v in vectors] if float(norm) > 0 else vectors


def relative(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def custom_functions(value) -> list[str]:
    """``autograd.Function`` subclasses in the copy's graph (their backward is whatever they say it is)."""
    from torch.autograd.function import BackwardCFunction

    found: dict[str, None] = {}
    stack, seen = [value.grad_fn], set()
    while stack and len(seen) < MAX_NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, BackwardCFunction):
            found.setdefault(f"autograd.Function {type(node).__name__.removesuffix('Backward')}", None)
        stack.extend(n for n, _ in node.next_functions)
    return list(found)


class SurgeryWatch:
    """What the copy's forward does to autograd: detaches, ``.data``, ``no_grad``, hooks, values read out, and in-place
    edits of graph tensors that autograd does not see."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.surgery: list[str] = []
        self.hidden: list[str] = []
        self._aliases: dict[int, tuple[Any, str]] = {}  # id of a .data / .detach() result -> (it, how)

    def _note(self, found: list[str], what: str) -> None:
        if what not in found:
            found.append(what)

    def mode(self):
        import torch
        from torch.overrides import TorchFunctionMode

        watch, data_get = self, torch.Tensor.data.__get__

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                result = func(*args, **(kwargs or {}))
                name = getattr(func, "__name__", "")
                source = args[0] if args and isinstance(args[0], torch.Tensor) else None
                if func == data_get or name == "detach":
                    how = ".data" if func == data_get else ".detach()"
                    if source is not None and source.requires_grad:
                        watch._note(watch.surgery, how)
                        if source.grad_fn is not None:
                            watch._aliases[id(result)] = (result, how)
                elif name == "_set_grad_enabled" and args and not args[0]:
                    watch._note(watch.surgery, "no_grad")
                elif name in READS_OUT and source is not None and source.requires_grad:
                    watch._note(watch.surgery, f".{name}()")
                elif name in ("register_hook", "detach_", "requires_grad_"):
                    watch._note(watch.surgery, f".{name}()")
                elif source is not None and in_place(name):
                    alias = watch._aliases.get(id(source))
                    if alias is not None and alias[0] is source:
                        watch._note(watch.hidden, f"{name} through {alias[1]}")
                    elif source.grad_fn is not None and not torch.is_grad_enabled():
                        watch._note(watch.hidden, f"{name} under no_grad")
                return result

        return Mode()


def in_place(name: str) -> bool:
    return (name.endswith("_") and not name.startswith("_")) or name in IN_PLACE_OPERATORS


# -- the judge ----------------------------------------------------------------------


def _slopes(obs: Observation) -> str:
    figures = ", ".join(f"{d:.6g} (step {e:.1e})" for d, e in zip(obs.differences, obs.steps))
    return f"autograd's slope {obs.slope:.6g}, finite differences {figures}"


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.model:
        why = obs.problem or "no module's forward was reached by a backward pass: nothing to compare"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.problem or obs.slope is None or not obs.differences:
        why = f"{obs.model} was not checked: {obs.problem or 'no finite difference was taken'}"
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    errors = [relative(obs.slope, d) for d in obs.differences]
    best = min(errors)
    where = (f"on a float64 copy of {obs.model} ({obs.samples} samples, {obs.tensors} parameter tensors), along a "
             f"random direction")
    if best <= AGREE:
        return Finding(ID, TITLE, PASS, f"{best:.1e}", f"≤ {AGREE:.0e}",
                       f"{where}, the gradient agrees with a finite difference of the output: {_slopes(obs)}",
                       observed=f"{where}, autograd's slope and a finite difference agree to {best:.1e}")
    seen = f"{where}, {_slopes(obs)}: they differ by {best:.2g} (relative)"
    observed = f"{where}, the output's slope by autograd and by finite differences differ by {best:.2g} (relative)"
    value = abs(obs.value or 0.0)
    if all(max(abs(obs.slope), abs(d)) * e <= FLAT * value for d, e in zip(obs.differences, obs.steps)):
        why = f"{where}, the output hardly changed along the direction ({_slopes(obs)})"
        return Finding(ID, TITLE, CANNOT_TELL, f"{best:.2g}", f"≤ {AGREE:.0e}", why, observed=why)
    if len(obs.differences) < 2 or relative(*obs.differences) > STABLE * best:
        why = f"{seen}; but the two finite differences do not settle (a kink in the function near these weights?)"
        return Finding(ID, TITLE, CANNOT_TELL, f"{best:.2g}", f"≤ {AGREE:.0e}", why, observed=why)
    if obs.gaps[-1] > KINK * best:
        why = (f"{seen}; but the output's forward and backward differences disagree too ({obs.gaps[-1]:.2g}): a kink "
               "at these very weights, or a forward that is not repeatable, could explain it")
        return Finding(ID, TITLE, CANNOT_TELL, f"{best:.2g}", f"≤ {AGREE:.0e}", why, observed=why)
    if best <= DISAGREE:
        why = f"{seen}: more than rounding explains, too little to be sure"
        return Finding(ID, TITLE, CANNOT_TELL, f"{best:.2g}", f"≤ {DISAGREE:.0e}", why, observed=why)
    if obs.surgery and not obs.hidden_edits:
        why = (f"{seen}; but the forward uses {', '.join(obs.surgery)}, which can make the gradient differ from the "
               "forward on purpose (a straight-through estimator, a gradient reversal)")
        return Finding(ID, TITLE, CANNOT_TELL, f"{best:.2g}", f"≤ {DISAGREE:.0e}", why,
                       observed=f"{observed}, in a forward that may do so on purpose")
    edits = f" In the forward: {', '.join(obs.hidden_edits)}." if obs.hidden_edits else ""
    return Finding(ID, TITLE, FAIL, f"{best:.2g}", f"≤ {DISAGREE:.0e}",
                   f"{seen}. The gradient is not the slope of the function the forward computed: a value was changed "
                   f"where autograd does not see it (an in-place edit through `.data` or under `no_grad`), so "
                   f"training follows the gradient of another function.{edits}", observed=observed)
