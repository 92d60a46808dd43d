"""The timeline of an observed run: DataLoader passes, top-level forwards and their phases.

:mod:`checker.instrument` feeds it from PyTorch's hooks; probes read it (never write it) once the script
ended, or as events arrive.

Phases come from behaviour, not from names or DataLoaders (many trainers slice
tensors instead): a forward whose output a backward pass reached is training; one
run without gradients, or whose output no backward ever reached, is evaluation,
unless its output fed a training forward (a GAN's generated batch, a frozen
feature extractor's features) or it ran, with gradients, on a batch of a training
loader (a forward whose loss was skipped): then neither phase can be told. A DataLoader is a training loader when its batches
fed forwards that a backward pass reached, or updates happened while it was being consumed; one pass over it that made
no update can still be an evaluation on the training data (see :meth:`Timeline.role`). A forward run while a module is
being built (inside its ``__init__``: a dummy input measuring a flattened size, a dry run for lazy layers) is neither.
"""
from __future__ import annotations

import sys
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from checker import tensors
from checker.bus import EventBus, safe
from checker.clock import EVALUATION, FORWARD
from checker.events import Event, Forward, LossCall, Pass
from checker.plan import Plan, PrefixReached
from checker.tensors import find_labels, observable, tensors_in

TRAIN, EVAL = "train", "eval"
# checker.tensors.observable(), inlined in the hooks that run for every module call
_is_compiling = torch.compiler.is_compiling
_graph_task_id = torch._C._current_graph_task_id
_transforming = torch._C._functorch.peek_interpreter_stack
RECENT_OUTPUTS = 32  # outputs of gradient-free forwards remembered, to see them fed to a later forward
MAX_FRAMES = 64  # how far up the stack a forward looks for a module's __init__


@dataclass(kw_only=True)
class Timeline(EventBus):
    heartbeat: str | None = None
    passes: list[Pass] = field(default_factory=list)
    current: Pass | None = None
    labels: torch.Tensor | None = None
    forwards: list[Forward] = field(default_factory=list)
    forward: Forward | None = None  # the top-level forward running now
    last_forward: Forward | None = None
    _depth: int = 0
    _train_loaders: set[int] = field(default_factory=set)  # loaders whose batches fed forwards a backward reached,
    # or were being consumed when an update happened
    _unused_outputs: OrderedDict = field(default_factory=OrderedDict)  # storage pointer -> (tensor ref, Forward)
    _models: dict[int, Any] = field(default_factory=dict)  # serial -> weak reference, every top-level module
    _serials: dict[int, tuple[Any, int]] = field(default_factory=dict)  # id -> (weak reference, serial) of a module
    _next_serial: int = 0
    _batch_used: bool = True
    _last_beat: float = 0.0
    plan: Plan = field(default_factory=Plan)  # a prefix run stops where its plan says (``--steps``, ``--epochs``)
    prefix_stop: dict | None = None  # where a prefix run was stopped: {"updates", "passes", "at"}

    def running(self, module: nn.Module) -> None:
        """A module is about to run (every call, every module): the update ledger watches its parameters."""

    def serial(self, module: nn.Module) -> int:
        """``module``'s number in this run: unlike its ``id()``, never that of another module (an id is reused
        once its object is gone: a pretraining model thrown away, then the model trained)."""
        found = self._serials.get(id(module))
        if found is not None and found[0]() is module:
            return found[1]
        serial, self._next_serial = self._next_serial, self._next_serial + 1
        self._serials[id(module)] = (weakref.ref(module), serial)
        return serial

    @property
    def depth(self) -> int:
        """How deep in module calls the run is now (0: outside any module's forward)."""
        return self._depth

    def beat(self) -> None:
        """Tell the watchdog the script is making progress (at most twice a second); the file holds the training
        steps taken so far, for a progress line (`kata watch`)."""
        now = time.monotonic()
        if self.heartbeat and now - self._last_beat > 0.5:
            self._last_beat = now
            with open(self.heartbeat, "w") as f:
                f.write(str(self.steps()))

    def steps(self) -> int:
        """Training steps taken so far (the update ledger counts them)."""
        return 0

    def stop_if_due(self, at: str, observed: Pass | None = None) -> None:
        """Where a training step may begin (a training loader's next batch, a forward with gradients outside any
        training loader, an optimizer step): a prefix run that took its steps (or passes) stops here, before the
        step, by raising :class:`PrefixReached` into the script. Evaluation in between still runs."""
        if not self.plan.prefix or self.prefix_stop is not None:
            return
        try:
            due = self._prefix_due(at, observed)
        except Exception:  # noqa: BLE001 - the checker's own failure never stops the script
            due = False
        if due:
            self.prefix_stop = {"updates": self.steps(), "passes": self._training_passes(), "at": at}
            raise PrefixReached

    def _prefix_due(self, at: str, observed: Pass | None) -> bool:
        plan = self.plan
        if at == "batch":
            if observed is None or observed.loader not in self._train_loaders:
                return False
            if plan.epochs is not None and observed.batches == 0 and self._training_passes(observed.index) >= plan.epochs:
                return True
        elif at == "forward" and (self._train_loaders or not torch.is_grad_enabled()):
            return False  # a training loader's batches are where its steps begin; evaluation goes on
        elif at == "step" and plan.epochs is not None and self.current is not None:
            # A DataLoader made anew for every epoch is known to train only once its first batch reached a backward:
            # its pass stops before its first update, after E training passes of any loader.
            if self._training_passes(self.current.index) >= plan.epochs:
                if self.current.updates == 0:  # its first batch, stopped before its update: not part of what is judged
                    self.current.batches = 0
                return True
        return plan.steps is not None and self.steps() >= plan.steps

    def _training_passes(self, before: int | None = None) -> int:
        """Training passes with batches (before pass ``before``, when given)."""
        return sum(1 for p in self.passes[:before] if p.batches and self.role(p.index) == TRAIN)

    def training_loaders(self) -> set[int]:
        return self._train_loaders

    def role(self, pass_index: int | None) -> str | None:
        """"train", "eval", or None for work done outside any DataLoader pass. A pass over a training loader that
        made no update and that no backward pass reached is an evaluation on the training data (a final
        ``accuracy(train_loader)``), unless it computed a non-finite loss or ran its model with gradients and in
        training mode: then its batches were skipped (``if not isfinite(loss): continue``), not evaluated."""
        if pass_index is None:
            return None
        observed = self.passes[pass_index]
        if observed.loader not in self.training_loaders():
            return EVAL
        if observed.updates or observed.reached or observed.active or not observed.batches:
            return TRAIN
        return TRAIN if observed.nonfinite is not None and bool(observed.nonfinite) else EVAL

    def phase(self, forward: Forward) -> str | None:
        """"train", "eval", or None when the run does not tell (see the module docstring)."""
        if forward.setup:  # part of building a module: neither training nor an evaluation
            return None
        if forward.reached:
            if not forward.probes_input:
                return TRAIN
            # An attack or a saliency map: evaluation in an evaluation pass; inside training (adversarial training,
            # TRADES's attack run in eval mode between training forwards), part of training that is neither.
            return EVAL if self.role(forward.pass_index) == EVAL else None
        if any(self.forwards[i].reached for i in forward.fed):
            return None  # a GAN's generated batch, or a frozen feature extractor's features: part of training
        if forward.grad and self.role(forward.pass_index) == TRAIN:
            return None
        return EVAL

    @safe
    def start_batch(self, observed: Pass, batch: Any) -> None:
        self.current = observed
        self._batch_used = False
        self.labels = find_labels(batch)
        self.beat()
        self.emit(Event.BATCH, batch)

    @safe
    def end_pass(self, observed: Pass) -> None:
        observed.exhausted = True
        if self.current is observed:
            self.current = None
        self.emit(Event.PASS_END, observed)

    @safe
    def module_pre(self, module: nn.Module, args: Any) -> None:
        """A global forward pre-hook: called before every module's forward."""
        if _is_compiling() or _graph_task_id() != -1 or _transforming() is not None:  # observable(), inlined: this
            return  # runs for every module call
        if self._depth == 0 and not isinstance(module, nn.modules.loss._Loss):
            self.stop_if_due("forward")
            if self.clock is not None:
                self.clock.enter(FORWARD if torch.is_grad_enabled() else EVALUATION)
            self._start_forward(module, args)
        self._depth += 1
        self.running(module)
        self.emit(Event.MODULE, module)

    @safe
    def module_post(self, module: nn.Module, args: Any, output: Any) -> None:
        """A global forward hook: called after every module's forward."""
        if _is_compiling() or _graph_task_id() != -1 or _transforming() is not None:
            return
        self._depth = max(0, self._depth - 1)
        forward = self.forward
        if self._depth == 0 and forward is not None:
            self.forward = None
            self._end_forward(forward, output)
            if self.clock is not None:
                self.clock.leave(FORWARD if forward.grad else EVALUATION)

    def _start_forward(self, module: nn.Module, args: Any) -> None:
        inputs = tensors_in(args)
        if self.current is not None and not self._batch_used:
            self.current.batches += 1
            self._batch_used = True
        grad = torch.is_grad_enabled()
        forward = Forward(len(self.forwards), self.serial(module), type(module).__name__, grad,
                          self.current.index if self.current is not None else None,
                          tensors.leading(inputs[0]) if inputs else None, ref=weakref.ref(module),
                          setup=constructing(), probes_input=grad and any(self._probes(t) for t in inputs))
        for t in inputs:
            held = self._unused_outputs.get(tensors.storage_key(t))
            if held is not None and held[0]() is not None:  # still alive: the pointer was not reused
                held[1].fed.append(forward.index)
        if type(module).__name__ == "OptimizedModule":  # hooks inside compiled code are not run: read the flags
            forward.modes |= compiled_modes(module)
            if "active" in forward.modes and forward.grad and self.current is not None:
                self.current.active = True
        self.forwards.append(forward)
        self._models.setdefault(forward.module, forward.ref)
        self.forward = self.last_forward = forward
        self.emit(Event.FORWARD, forward)

    def is_parameter(self, t: torch.Tensor) -> bool:
        """Whether a leaf tensor is trained (the update ledger also knows the plain tensors optimizers hold)."""
        return isinstance(t, nn.Parameter)

    def _probes(self, t: torch.Tensor) -> bool:
        """Whether a forward's input requires grad through a leaf that is no parameter: the input itself made to
        require grad, or a perturbation added to it (``model(x + delta)``). A graph too large to read (a generator's
        output fed to a discriminator) is not such an input."""
        if not t.requires_grad:
            return False
        leaves = tensors.grad_leaves(t)
        return bool(leaves) and any(not self.is_parameter(leaf) for leaf in leaves)

    def _end_forward(self, forward: Forward, output: Any) -> None:
        def reached(grad: torch.Tensor) -> None:
            if not forward.reached:
                forward.reached = True
                # A backward through an attacked input reads the input's gradient: it makes its pass a training
                # pass only when an update follows in that pass (adversarial training), not in a robustness test.
                if forward.pass_index is not None and not forward.probes_input:
                    observed = self.passes[forward.pass_index]
                    observed.reached = True
                    self._train_loaders.add(observed.loader)

        for t in tensors_in(output):
            if t.requires_grad and t.grad_fn is not None:
                try:
                    t.register_hook(reached)
                except RuntimeError:  # a tensor kind that takes no hooks: its phase stays unknown
                    pass
            elif (key := tensors.storage_key(t)) is not None:  # an output no backward can reach through: a
                # frozen or no-grad forward's, which may feed another model (a GAN's generated batch, features)
                self._unused_outputs[key] = (weakref.ref(t), forward)
                while len(self._unused_outputs) > RECENT_OUTPUTS:
                    self._unused_outputs.popitem(last=False)
        self.beat()
        self.emit(Event.FORWARD_END, forward, output)

    @safe
    def mode(self, kind: str, training: bool) -> None:
        if not observable():
            return
        forward = self.forward
        if forward is not None:
            forward.modes.add("active" if training else "inactive")
            if training and forward.grad and forward.pass_index is not None:
                self.passes[forward.pass_index].active = True
        self.emit(Event.MODE, kind, training)

    @safe
    def loss(self, call: LossCall) -> None:
        out, current = call.output, self.current
        if (current is not None and isinstance(out, torch.Tensor) and out.numel() == 1 and out.is_floating_point()
                and tensors.plain(out)):
            bad = ~torch.isfinite(out.detach()).reshape(())
            current.nonfinite = bad if current.nonfinite is None else current.nonfinite | bad
        self.emit(Event.LOSS, call)


def compiled_modes(module: nn.Module) -> set[str]:
    """"active" / "inactive" from the dropout and batch-norm layers inside a compiled model, by their flags."""
    found = set()
    for m in module._orig_mod.modules():
        dropout = isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0
        batchnorm = isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
        if dropout or batchnorm:
            found.add("active" if m.training else "inactive")
    return found


def constructing() -> bool:
    """Whether a module's ``__init__`` is running further up the stack: a forward there builds the module (a dummy
    input that measures a flattened size, a dry run that materialises lazy layers), it neither trains nor
    evaluates."""
    frame = sys._getframe(2)
    for _ in range(MAX_FRAMES):
        if frame is None:
            return False
        if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), nn.Module):
            return True
        frame = frame.f_back
    return False
