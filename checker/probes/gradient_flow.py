"""gradient-flow: every trained parameter that takes part in training receives a gradient from the data.

Rule ("use backprop to chart dependencies"). A parameter *takes part* when its
module runs inside a top-level forward that started with gradients enabled and
is not evaluation (a backward pass reached its output, or it ran on a training
loader's batch), and it is *trained*: an optimizer holds it, or it is updated by
hand (for a parameter that ran only outside autograd, see below: an optimizer
holds it in a group whose learning rate was above 0 at a checked step, the
first 16 steps and every 8th after).

A gradient contribution (what a hook on the parameter sees in one backward
pass) *depends on the data* when it is not all zeros and, for a parameter of two
or more elements with non-zero values, is not an exact multiple of the
parameter itself (its residual after projecting out the parameter exceeds
``PROPORTIONAL`` of its norm, or 8 machine epsilons of the parameter's dtype).
A penalty on the weights added to the loss (``λ·Σ‖θ‖²``) gives every parameter
the contribution ``2λθ`` whatever the data: it is weight decay, and it does not
count. A scalar parameter's every gradient is a multiple of itself: any non-zero
contribution counts. A parameter is *reached* when it, or another parameter of
the module it ran in, received such a contribution: then the backward pass went
through that module's use in the forward, and a parameter whose own data
gradient is zero by design (a linear layer's bias before batch-norm, which
removes it) is not cut off. Contributions are read at the first 16 backward
passes that reach a parameter, then every 8th, until one depends on the data
(one host sync each; a correct parameter is settled at its first).

* fail (*starved*): a trained parameter ran in training with autograd recording
  it (gradients enabled, ``requires_grad``) and never received a contribution
  that depends on the data. A ``.detach()`` or ``.data`` that cuts a branch
  leaves it without any gradient; an auxiliary term multiplied by zero gives it
  zeros; an L2 penalty gives it (and the rest of its cut-off module) only
  multiples of itself.
* fail (*still at its initial values*): a trained parameter ran in training only
  outside autograd (``requires_grad=False``, or gradients disabled inside a
  forward that started with them on: ``with torch.no_grad():`` around a part of
  ``forward``), never received a contribution that depends on the data, and its
  values when it first ran in training were still those it was built with.
* Deliberate freezing passes, said in the message. An optimizer is often given
  ``model.parameters()`` while a pretrained part is frozen, so for a parameter
  that ran only outside autograd the run is asked where its values came from:
  it was built frozen (``requires_grad=False`` when registered, as
  ``nn.Embedding.from_pretrained`` does); values were loaded into it before it
  first ran in training (``Module.load_state_dict`` into its module or a parent,
  its missing keys left out, or ``from_pretrained``): pretrained; or its values
  changed during the run although it never received a gradient (an EMA or
  momentum copy; any change of its first values counts, however small: a momentum
  of 0.999 moves batch-norm weights that both encoders start at 1 by a thousandth). A frozen part no optimizer holds (``filter(lambda p:
  p.requires_grad, ...)``), or held in a group whose rate stayed 0, is not trained.
  A part run under ``no_grad`` as a forward of its own (a frozen feature
  extractor feeding a trained head, a teacher) is not inside a forward that
  started with gradients on; a block recomputed by reentrant activation
  checkpointing runs under ``no_grad`` but receives its gradient in the backward.
* advice: a loaded parameter that an optimizer was given while it required
  grad, and that required none when it ran in training: frozen after the
  optimizer was built to train it. The script said both "train this" and
  "freeze this"; its values are pretrained, so no harm shows, but whichever was
  meant, the other is a mistake (freeze before building the optimizer, and give
  it only what requires grad).
* cannot tell: such a parameter's values when it first ran in training differ from
  those it was built with, and no load was seen: pretrained values copied in
  (``weight.data.copy_(vectors)``, a parameter replaced by a new one), a model
  unpickled or deep-copied, or an initialisation by tensor methods after
  construction (``w.data.normal_()``) look alike.

"Built with" is a fingerprint (the first 8 values, copied without a host sync)
taken when the parameter is registered (a global registration hook), refreshed
by every ``torch.nn.init`` function applied to it (also through ``.data``) and
whenever its module is attached to a parent, compared with a relative tolerance
of 1e-2 (a dtype or device change keeps a match). A parameter that replaces
another under the same name gets no fingerprint. The instrumentation's
REGISTERED, ATTACHED, INIT, LOAD_STATE and PRETRAINED events (registration hooks;
the ``torch.nn.init`` functions, ``Module.load_state_dict`` and ``from_pretrained``
wrapped) show this; they cost a copy of 8 values per call, at construction.

Why a correct script cannot fail: a parameter that ran in a training forward with
autograd on receives the loss's gradient through that use unless something cut
the graph; one run without autograd is either deliberate (one of the passing
cases above) or never learns from the data. Two correct shapes would still fail:
a part frozen on purpose at its random initial values (a fixed random
projection) while the optimizer, given it, is told to train it; and a parameter
whose every data gradient is a multiple of its values (one used only through
its norm; no such model known). Not caught: a part frozen by mistake whose
values were set after construction by tensor methods (cannot tell); a frozen
part called as a top-level forward of its own, with gradients on, in a script
without a DataLoader (its forward counts as evaluation); a weight penalty that is
not a multiple of the weights (L1). n/a: no trained parameter ran in a training
forward.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "gradient-flow"
TITLE = "gradient reaches every layer"
SYMPTOM_ID, SYMPTOM = "gradient-reach", "gradient reaching parameters"

PROPORTIONAL = 1e-3  # relative residual under which a gradient is a multiple of the parameter
FIRST_TESTED, EVERY = 16, 8  # contributions read one by one, then every EVERY-th
FIRST_UPDATES = 16  # updates whose learning rates are read one by one, then every EVERY-th
HEAD = 8  # values kept as a parameter's fingerprint
SAME = 1e-2  # relative tolerance of two fingerprints
SHOWN = 6


@dataclass
class Observation:
    took_part: int = 0  # trained parameters that ran in training with autograd recording them
    starved: list[str] = field(default_factory=list)  # ... that never received a gradient depending on the data
    outside: int = 0  # trained parameters that ran in training only outside autograd
    initial: list[str] = field(default_factory=list)  # ... never reached, still at the values they were built with
    replaced: list[str] = field(default_factory=list)  # ... with values put in after they were built, not loaded
    built_frozen: int = 0  # ... registered with requires_grad=False
    loaded: int = 0  # ... loaded before they first ran in training
    moved: int = 0  # ... whose values changed during the run without a gradient
    flipped: list[str] = field(default_factory=list)  # ... loaded, given to an optimizer while they required grad,
    # frozen (requires_grad=False) by the time they ran in training


@dataclass
class Origin:
    """Where a parameter's values came from, as far as the run showed."""

    ref: Any  # a weak reference to the parameter
    head: Any  # its first values when built (a tensor), None when unknown
    built_frozen: bool = False
    loaded: bool = False


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self.torch = torch
        self.is_lazy = torch.nn.parameter.is_lazy
        self.grad_enabled = torch.is_grad_enabled
        self.reached: set[int] = set()  # received a contribution depending on the data
        self.graded: set[int] = set()  # received a non-zero contribution
        self.tested: dict[int, int] = {}  # contributions seen, per parameter not yet reached
        self.pending: dict[int, set[int]] = {}  # forward index -> parameters that ran in it with autograd
        self.pending_outside: dict[int, set[int]] = {}  # forward index -> parameters that ran in it without
        self.ran: set[int] = set()  # parameters that ran in a training forward with autograd
        self.outside: set[int] = set()  # ... without autograd
        self.snapshots: dict[int, tuple[bool, Any, bool]] = {}  # parameter -> (loaded, first values, requires_grad)
        self.first_use: dict[int, tuple[bool, Any, bool]] = {}  # ... at a run outside autograd / the first in training
        self.given: dict[int, Any] = {}  # parameter id -> weak reference: given to an optimizer while it required grad
        self.seen: dict[int, set[int]] = {}  # forward index -> modules already read in it (x2, +1 with autograd)
        self.owner: dict[int, int] = {}  # parameter id -> serial (``session.serial``) of the module it ran in
        self.modules: set[int] = set()  # top-level modules whose parameters are named
        self.names: dict[int, tuple[int, str]] = {}  # parameter id -> (size of the model named from, "model.head.1.weight")
        self.origins: dict[int, Origin] = {}
        self.storages: dict[int, int] = {}  # storage pointer -> parameter id (an init through ``.data``)
        self.positive: set[tuple[int, int]] = set()  # (optimizer id, group index) seen with a learning rate > 0
        self.updates = 0
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.MODULE, ID, self.on_module)
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.REGISTERED, ID, self.on_register)
        session.on(Event.ATTACHED, ID, self.on_attach)
        session.on(Event.INIT, ID, self.on_init)
        session.on(Event.LOAD_STATE, ID, self.on_load)
        session.on(Event.PRETRAINED, ID, self.on_pretrained)
        session.on(Event.GROUP_ADDED, ID, self.on_group)

    # -- where values come from ---------------------------------------------------
    def head(self, p) -> Any:
        """The first values of ``p`` (a copy, no host sync), or None for a tensor without data."""
        if p.is_meta or self.is_lazy(p) or p.layout != self.torch.strided:
            return None
        with self.torch.no_grad():
            return p.detach().reshape(-1)[:HEAD].clone()

    def same(self, a, b) -> bool:
        if a is None or b is None or a.shape != b.shape:
            return False
        return bool(self.torch.allclose(a.float().cpu(), b.float().cpu(), rtol=SAME, atol=1e-6, equal_nan=True))

    def changed(self, now, first) -> bool:
        """Whether a parameter's values moved between its first use and now, at all: a moving average with a rate
        near 1 moves its batch-norm weights by a thousandth in a short run (MoCo's key encoder), inside ``same``'s
        tolerance, which is meant for a dtype or device change between construction and use."""
        if now is None or first is None:
            return False
        return now.shape != first.shape or not bool(self.torch.equal(now.float().cpu(), first.float().cpu()))

    def origin(self, p) -> Origin | None:
        found = self.origins.get(id(p))
        return found if found is not None and found.ref() is p else None

    def built(self, p) -> None:
        """``p``'s values are (again) those it was built with."""
        found = self.origin(p)
        if found is None:
            found = self.origins[id(p)] = Origin(weakref.ref(p), None, not p.requires_grad)
        found.head = self.head(p)
        if found.head is not None:
            self.storages[p.untyped_storage().data_ptr()] = id(p)

    def on_register(self, module, name: str, param) -> None:
        if param is None:
            return
        if self.origin(param) is None:  # not one already known (a tied weight registered on a second module)
            self.forget(id(param))
        before = module._parameters.get(name)
        if before is not None and before is not param:  # a replacement: its values come from outside
            self.origins[id(param)] = Origin(weakref.ref(param), None, not param.requires_grad)
            return
        self.built(param)

    def forget(self, pid: int) -> None:
        """A parameter being registered may reuse the id of one that no longer exists (a pretraining model thrown
        away): what was known under that id is not known of it."""
        for known in (self.reached, self.graded, self.ran, self.outside):
            known.discard(pid)
        for known in (self.tested, self.owner, self.first_use, self.snapshots, self.given, self.names):
            known.pop(pid, None)

    def on_attach(self, parent, name: str, module) -> None:
        if module is not None:
            for p in module.parameters():
                self.built(p)

    def on_init(self, tensor) -> None:
        if not isinstance(tensor, self.torch.Tensor) or tensor.is_meta or tensor.layout != self.torch.strided:
            return
        found = self.origin(tensor)
        if found is None:
            pid = self.storages.get(tensor.untyped_storage().data_ptr())
            found = self.origins.get(pid) if pid is not None else None
            p = found.ref() if found is not None else None
            if p is None or p.untyped_storage().data_ptr() != tensor.untyped_storage().data_ptr():
                return
            tensor = p
        self.built(tensor)

    def on_load(self, module, state_dict, result) -> None:
        missing = set(getattr(result, "missing_keys", ()))
        for name, p in module.named_parameters():
            if name not in missing:
                self.mark_loaded(p)

    def on_pretrained(self, module) -> None:
        for p in module.parameters():
            self.mark_loaded(p)

    def on_group(self, optimizer, group) -> None:
        for p in group["params"]:
            if p.requires_grad:
                self.given[id(p)] = weakref.ref(p)

    def mark_loaded(self, p) -> None:
        found = self.origin(p)
        if found is None:
            found = self.origins[id(p)] = Origin(weakref.ref(p), None, False)
        found.loaded = True

    # -- what runs, and what reaches it ---------------------------------------------
    def on_grad(self, p, grad) -> None:
        pid = id(p)
        if pid in self.reached:
            return
        n = self.tested.get(pid, 0)
        self.tested[pid] = n + 1
        if n >= FIRST_TESTED and (n - FIRST_TESTED) % EVERY:
            return
        nonzero, data = self.read(p, grad)
        if nonzero:
            self.graded.add(pid)
        if data:
            self.reached.add(pid)
            self.tested.pop(pid, None)

    def read(self, p, grad) -> tuple[bool, bool]:
        """(not all zeros, depends on the data): see the module docstring. One host sync."""
        torch = self.torch
        with torch.no_grad():
            if grad.is_sparse or grad.shape != p.shape or p.numel() < 2 or not p.is_floating_point():
                nonzero = bool(grad.ne(0).any()) if not grad.is_sparse else grad._nnz() > 0
                return nonzero, nonzero
            g = grad.detach().reshape(-1).float()
            w = p.detach().reshape(-1).float().to(g.device)
            ww = w.dot(w)
            residual = torch.linalg.vector_norm(g - (g.dot(w) / ww.clamp_min(torch.finfo(torch.float32).tiny)) * w)
            nonzero, residual, norm, ww = torch.stack(
                [g.ne(0).any().float(), residual, torch.linalg.vector_norm(g), ww]).tolist()
        if not nonzero:
            return False, False
        tolerance = max(PROPORTIONAL, 8 * torch.finfo(p.dtype).eps)
        return True, ww == 0 or not residual <= tolerance * norm

    def on_module(self, module) -> None:
        forward = self.session.forward
        grad = self.grad_enabled()
        if forward is None or not (grad or forward.grad):
            return
        seen = self.seen.setdefault(forward.index, set())
        key = 2 * id(module) + grad
        if key in seen:
            return
        seen.add(key)
        params = [p for p in module._parameters.values() if p is not None and p.numel()]  # an empty parameter
        if params:  # (``nn.Parameter(torch.empty(0))``, kept to read the device) has no gradient to receive
            serial = self.session.serial(module)
            for p in params:
                self.owner.setdefault(id(p), serial)
        if grad:
            self.pending.setdefault(forward.index, set()).update(id(p) for p in params if p.requires_grad)
        if not forward.grad:
            return
        off = [p for p in params if not (grad and p.requires_grad)]
        if off:
            self.pending_outside.setdefault(forward.index, set()).update(id(p) for p in off)
            for p in off:
                if id(p) not in self.first_use and id(p) not in self.snapshots:
                    found = self.origin(p)
                    self.snapshots[id(p)] = (found is not None and found.loaded, self.head(p), p.requires_grad)

    def on_update(self, update) -> None:
        self._settle()
        optimizer = update.optimizer
        if optimizer is None:
            return
        self.updates += 1
        n = self.updates - 1
        if n >= FIRST_UPDATES and (n - FIRST_UPDATES) % EVERY:
            return
        for i, group in enumerate(optimizer.param_groups):
            lr = group.get("lr")
            if (id(optimizer), i) not in self.positive and (lr is None or float(lr) > 0):
                self.positive.add((id(optimizer), i))

    def _settle(self) -> None:
        """Forwards whose phase is known by now: a training one adds its parameters to those that ran."""
        forwards = self.session.forwards
        for index, ids in self.pending.items():
            if self.session.phase(forwards[index]) != "eval":
                self.ran |= ids
        for index, ids in self.pending_outside.items():
            if self.session.phase(forwards[index]) != "eval":
                self.outside |= ids
                for pid in ids:
                    if pid not in self.first_use and pid in self.snapshots:
                        self.first_use[pid] = self.snapshots[pid]
        self.pending.clear()
        self.pending_outside.clear()
        self.snapshots.clear()
        self.seen.clear()

    # -- the summary --------------------------------------------------------------
    def summary(self) -> Observation:
        self._settle()
        trained = self.session.trained_ids()
        held = {id(p): p for opt in self.session.optimizers for i, group in enumerate(opt.param_groups)
                if (id(opt), i) in self.positive for p in group["params"]}
        modules = {self.owner[pid] for pid in self.reached if pid in self.owner}
        reached = self.reached | {pid for pid, module in self.owner.items() if module in modules}
        took_part = self.ran & trained
        starved = took_part - reached
        outside = {pid: p for pid, p in held.items() if pid in self.outside and pid not in self.ran}
        kinds: dict[str, list[int]] = {"initial": [], "replaced": [], "built_frozen": [], "loaded": [], "moved": [],
                                       "flipped": []}
        for pid, p in outside.items():
            if pid not in reached:
                kinds[self.kind(pid, p)].append(pid)
        if starved or outside:
            self.name_from_script_globals()
        return Observation(len(took_part), self.named(starved), len(outside), self.named(kinds["initial"]),
                           self.named(kinds["replaced"]), len(kinds["built_frozen"]), len(kinds["loaded"]),
                           len(kinds["moved"]), self.named(kinds["flipped"]))

    def kind(self, pid: int, p) -> str:
        """Why a trained parameter ran in training only outside autograd, as far as its values tell."""
        found = self.origin(p)
        if found is not None and found.built_frozen:
            return "built_frozen"
        loaded, first, required = self.first_use.get(pid, (False, None, True))
        if loaded:
            given = self.given.get(pid)
            return "flipped" if not required and given is not None and given() is p else "loaded"
        if pid not in self.graded and first is not None and self.changed(self.head(p), first):
            return "moved"
        if found is not None and self.same(found.head, first):
            return "initial"
        return "replaced"

    def named(self, ids) -> list[str]:
        return sorted(self.names.get(i, (0, "an unnamed parameter"))[1] for i in ids)

    def on_forward(self, forward) -> None:
        if forward.module in self.modules:
            return
        self.modules.add(forward.module)
        module = forward.ref()
        if module is not None:
            self.name_within(module, forward.name)

    def name_within(self, module, prefix: str, over_equals: bool = False) -> None:
        """Name ``module``'s parameters by their path in it, unless a bigger model that holds them named them."""
        named = list(module.named_parameters())
        for name, p in named:
            size = self.names.get(id(p), (0, ""))[0]
            if len(named) > size or (over_equals and len(named) == size):
                self.names[id(p)] = (len(named), f"{prefix}.{name}")

    def name_from_script_globals(self) -> None:
        """A model the script keeps in a global (``model``) names its parts as the script would: ``model.head.1.weight``,
        even when only a part of it (``model.head``) was ever called on its own."""
        import torch

        for variable, value in self.session.script_globals.items():
            if isinstance(value, torch.nn.Module) and not variable.startswith("_"):
                self.name_within(value, variable, over_equals=True)


def _shown(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _deliberate(obs: Observation) -> str:
    """The frozen parts left out, and why, for the message of a finding."""
    parts = [f"{n} {what}" for n, what in ((obs.built_frozen, "built frozen"),
                                             (obs.loaded, "loaded before training (pretrained)"),
                                             (obs.moved, "changed without gradient (a moving-average copy)")) if n]
    if not parts:
        return ""
    return ("; left out as frozen on purpose, among the trained tensors that ran with gradients off: "
            + ", ".join(parts))


def judge(obs: Observation, facts: RunFacts) -> Finding:
    total = obs.took_part + obs.outside
    if total == 0:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no trained parameter ran in a training forward")
    failing = obs.starved + obs.initial
    measured, threshold = f"{len(failing)} of {total} tensors", "0"
    if failing:
        causes = []
        if obs.starved:
            causes.append(f"{len(obs.starved)} of {total} trained parameter tensors ran in training but never received "
                          f"a gradient that depends on the data ({_shown(obs.starved)})")
        if obs.initial:
            causes.append(f"{len(obs.initial)} of {total} trained parameter tensors ran in training with gradients off "
                          f"(requires_grad=False, or under no_grad) although an optimizer trains them, and kept the "
                          f"values they were built with ({_shown(obs.initial)})")
        return Finding(ID, TITLE, FAIL, measured, threshold, "; ".join(causes) + _deliberate(obs),
                       observed=f"{len(failing)} of {total} trained parameter tensors ran in training but never "
                                f"received a gradient that depends on the data ({_shown(sorted(failing))})")
    if obs.replaced:
        n = len(obs.replaced)
        return Finding(ID, TITLE, CANNOT_TELL, f"{n} of {total} tensors", threshold,
                       f"{n} trained parameter tensors ran in training with gradients off ({_shown(obs.replaced)}); "
                       "their values had been replaced after they were built, but not by load_state_dict: pretrained "
                       "values copied in, or an initialisation by tensor methods, cannot be told apart, so neither "
                       "can a deliberate freeze from a mistaken one" + _deliberate(obs),
                       observed=f"{n} of {total} trained parameter tensors ran in training but never received a "
                                f"gradient ({_shown(obs.replaced)}); their values were set after they were built")
    if obs.flipped:
        n = len(obs.flipped)
        return Finding(ID, TITLE, ADVICE, f"{n} of {total} tensors", threshold,
                       f"{n} trained parameter tensors loaded before training ({_shown(obs.flipped)}) were given to an "
                       "optimizer while they required grad, then ran in training with requires_grad off and never "
                       "learned: frozen after the optimizer was built to train them. If the freeze is meant, freeze "
                       "before building the optimizer and give it only what requires grad; if not, remove it"
                       + _deliberate(obs),
                       observed=f"{n} of {total} trained parameter tensors ran in training but never received a "
                                f"gradient ({_shown(obs.flipped)}); they keep their loaded values")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   "every trained parameter that ran received a gradient that depends on the data" + _deliberate(obs),
                   observed="every trained parameter that ran received a gradient that depends on the data")
