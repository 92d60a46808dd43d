"""The observed run as a timeline: DataLoader passes, top-level forwards, backward passes and updates.

:mod:`checker.instrument` feeds it from PyTorch's hooks; probes subscribe to its
:class:`~checker.events.Event` stream and read the timeline once the script ended.

Phases come from behaviour, not from names or DataLoaders (many trainers slice
tensors instead): a forward whose output a backward pass reached is training; one
run without gradients, or whose output no backward ever reached, is evaluation,
unless its output fed a training forward (a GAN's generated batch, a frozen
feature extractor's features) or it ran, with gradients, on a batch of a training
loader (a forward whose loss was skipped): then neither phase can be told. A DataLoader is a training loader when its batches
fed forwards that a backward pass reached, or updates happened while it was being consumed.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from checker import tensors
from checker.events import Event, Forward, LossCall, Pass, Update
from checker.facts import PassFacts, RunFacts
from checker.params import ParamWatch, total_norm
from checker.patches import Patches
from checker.tensors import find_labels, observable, tensors_in

TRAIN, EVAL = "train", "eval"
# checker.tensors.observable(), inlined in the hooks that run for every module call
_is_compiling = torch.compiler.is_compiling
_graph_task_id = torch._C._current_graph_task_id
_transforming = torch._C._functorch.peek_interpreter_stack
RECENT_OUTPUTS = 32  # outputs of gradient-free forwards remembered, to see them fed to a later forward


def safe(method: Callable) -> Callable:
    """A timeline method called from a hook: a failure of the checker's own is the session's error (every probe
    reports it), never an exception in the script; after one, the session observes nothing more."""

    @functools.wraps(method)
    def guarded(self: "Session", *args: Any) -> Any:
        if "session" in self.errors:
            return None
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001 - the checker must never change what the script does
            self.errors["session"] = f"{type(exc).__name__}: {exc}"
            return None

    return guarded


@dataclass
class Session:
    channel_dir: str
    heartbeat: str | None = None
    passes: list[Pass] = field(default_factory=list)
    current: Pass | None = None
    labels: torch.Tensor | None = None
    forwards: list[Forward] = field(default_factory=list)
    forward: Forward | None = None  # the top-level forward running now
    last_forward: Forward | None = None
    updates: int = 0
    manual_updates: int = 0
    scaler_skips: int = 0
    backwards: int = 0
    backwards_before_first_update: int | None = None
    losses: list[float | None] = field(default_factory=list)
    loss_forwards: list[int] = field(default_factory=list)  # per loss: the top-level forwards begun before its backward
    loss_groups: list[int] = field(default_factory=list)  # per loss: which updater applied it (-1: none yet)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    script_globals: dict[str, Any] = field(default_factory=dict)  # the finished script's globals, for naming
    params: ParamWatch = field(default_factory=ParamWatch)
    rank: int | None = None  # in a process group: this process's rank, and the group's size
    world: int = 1
    _listeners: dict[Event, list[tuple[str, Callable]]] = field(default_factory=lambda: defaultdict(list))
    _depth: int = 0
    _step: Update | None = None
    _train_loaders: set[int] = field(default_factory=set)  # loaders whose batches fed forwards a backward reached,
    # or were being consumed when an update happened
    _unsettled: int = 0  # the first forward not yet credited to an update
    _backwards_since_update: int = 0
    _last_updater: int | None = None
    _alternations: int = 0  # updates by another optimizer than the last, with a backward in between
    _unused_outputs: OrderedDict = field(default_factory=OrderedDict)  # storage pointer -> (tensor ref, Forward)
    _models: dict[int, Any] = field(default_factory=dict)  # id -> weak reference, every top-level module
    _hand_models: set[int] = field(default_factory=set)  # ... that had parameters updated by hand
    _hand_trained: set[int] = field(default_factory=set)  # ids of their parameters
    _batch_used: bool = True
    _owners: dict[int, int] = field(default_factory=dict)  # parameter id -> id of the optimizer holding it
    _touched: set[int] = field(default_factory=set)  # optimizers whose parameters the current backward reached
    _coupled: bool = False  # one backward pass reached the parameters of two optimizers
    _unapplied: list[int] = field(default_factory=list)  # losses since the last update
    _updaters: dict[int | None, int] = field(default_factory=dict)  # optimizer id (None: by hand) that updated -> ordinal
    _scaled: dict[int, float] = field(default_factory=dict)  # id of a GradScaler-scaled loss -> its scale
    _last_beat: float = 0.0
    _last_update_pass: int | None = None  # the DataLoader pass the latest update happened in
    _closure_calls: int = -1  # calls of the running step's closure (-1: no closure step running)
    reevaluations: int = 0  # backward passes of a closure step after its first (one update's re-evaluations)
    _shared: dict[type, Any] = field(default_factory=dict)  # shared measurements, by kind
    patches: Patches = field(init=False)  # every patch and hook of the checker's, for the tamper check

    def __post_init__(self) -> None:
        self.patches = Patches(self.errors)

    # -- events -------------------------------------------------------------
    def on(self, event: Event, owner: str, callback: Callable) -> None:
        self._listeners[event].append((owner, callback))

    def shared(self, kind: type) -> Any:
        """The session's one instance of a shared measurement (:mod:`checker.probes._shared`), made on first use
        with the session, so that probes that read the same measurement never reach into each other."""
        found = self._shared.get(kind)
        if found is None:
            found = self._shared[kind] = kind(self)
        return found

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """No event reaches a probe inside (a probe running a copy of the model of its own)."""
        listeners, self._listeners = self._listeners, defaultdict(list)
        try:
            yield
        finally:
            self._listeners = listeners

    def listening(self, event: Event) -> bool:
        """Whether a probe that has not failed subscribed to ``event``."""
        return any(owner not in self.errors for owner, _ in self._listeners[event])

    def emit(self, event: Event, *args: Any) -> None:
        for owner, callback in self._listeners[event]:
            if owner in self.errors:
                continue
            try:
                callback(*args)
            except Exception as exc:  # a probe's bug must never break the user's script
                self.errors[owner] = f"{type(exc).__name__}: {exc}"

    total_norm = staticmethod(total_norm)

    def beat(self) -> None:
        """Tell the watchdog the script is making progress (at most twice a second)."""
        now = time.monotonic()
        if self.heartbeat and now - self._last_beat > 0.5:
            self._last_beat = now
            with open(self.heartbeat, "a"):
                pass
            os.utime(self.heartbeat)

    # -- phases -------------------------------------------------------------
    def training_loaders(self) -> set[int]:
        return self._train_loaders

    def role(self, pass_index: int | None) -> str | None:
        """"train", "eval", or None for work done outside any DataLoader pass."""
        if pass_index is None:
            return None
        return TRAIN if self.passes[pass_index].loader in self.training_loaders() else EVAL

    def phase(self, forward: Forward) -> str | None:
        """"train", "eval", or None when the run does not tell (see the module docstring)."""
        if forward.reached:
            return TRAIN
        if any(self.forwards[i].reached for i in forward.fed):
            return None  # a GAN's generated batch, or a frozen feature extractor's features: part of training
        if forward.grad and self.role(forward.pass_index) == TRAIN:
            return None
        return EVAL

    def trained_params(self) -> list[torch.Tensor]:
        """Parameters an optimizer holds, or that were changed by hand (still alive)."""
        seen: dict[int, torch.Tensor] = {}
        for opt in self.optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.requires_grad:
                        seen.setdefault(id(p), p)
        for p in self.params.updated_by_hand():
            seen.setdefault(id(p), p)
        return list(seen.values())

    def trained_ids(self) -> set[int]:
        """Ids of the trained parameters, with every parameter of a model that was updated by hand (a loop
        over ``model.parameters()`` trains them all, gradient or not)."""
        return {id(p) for p in self.trained_params()} | self._hand_trained

    # -- the timeline, fed by checker.instrument ------------------------------
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
            self._start_forward(module, args)
        self._depth += 1
        for p in module._parameters.values():
            if p is not None and p.requires_grad:
                self.params.watch(p, self._on_grad)
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

    def _start_forward(self, module: nn.Module, args: Any) -> None:
        inputs = tensors_in(args)
        if self.current is not None and not self._batch_used:
            self.current.batches += 1
            self._batch_used = True
        forward = Forward(len(self.forwards), id(module), type(module).__name__, torch.is_grad_enabled(),
                          self.current.index if self.current is not None else None,
                          tensors.leading(inputs[0]) if inputs else None, ref=weakref.ref(module))
        for t in inputs:
            held = self._unused_outputs.get(tensors.storage_key(t))
            if held is not None and held[0]() is not None:  # still alive: the pointer was not reused
                held[1].fed.append(forward.index)
        if type(module).__name__ == "OptimizedModule":  # hooks inside compiled code are not run: read the flags
            forward.modes |= compiled_modes(module)
        self.forwards.append(forward)
        self._models.setdefault(id(module), forward.ref)
        self.forward = self.last_forward = forward
        self.emit(Event.FORWARD, forward)

    def _end_forward(self, forward: Forward, output: Any) -> None:
        def reached(grad: torch.Tensor) -> None:
            if not forward.reached:
                forward.reached = True
                if forward.pass_index is not None:
                    self._train_loaders.add(self.passes[forward.pass_index].loader)

        for t in tensors_in(output):
            if t.requires_grad and t.grad_fn is not None:
                try:
                    t.register_hook(reached)
                except RuntimeError:  # a tensor kind that takes no hooks: its phase stays unknown
                    pass
            elif not forward.grad and (key := tensors.storage_key(t)) is not None:
                self._unused_outputs[key] = (weakref.ref(t), forward)
                while len(self._unused_outputs) > RECENT_OUTPUTS:
                    self._unused_outputs.popitem(last=False)
        self.beat()
        self.emit(Event.FORWARD_END, forward, output)

    @safe
    def mode(self, kind: str, training: bool) -> None:
        if not observable():
            return
        if self.forward is not None:
            self.forward.modes.add("active" if training else "inactive")
        self.emit(Event.MODE, kind, training)

    @safe
    def loss(self, call: LossCall) -> None:
        self.emit(Event.LOSS, call)

    @safe
    def scaled(self, loss: torch.Tensor, scale: float) -> None:
        self._scaled[id(loss)] = scale

    @safe
    def before_backward(self, loss: torch.Tensor) -> None:
        if self._closure_calls > 1:  # inside a closure step's later call: a re-evaluation of the same update
            self.reevaluations += 1  # (LBFGS's line search), not a backward pass of its own
            return
        self._settle_backward()
        self._check_manual_update()
        self.backwards += 1
        self._backwards_since_update += 1
        self.beat()
        if loss.numel() == 1 and loss.is_floating_point() and tensors.plain(loss):  # losses as JSON-safe floats; None
            # marks a NaN or infinite loss
            value = float(loss.detach().float()) / self._scaled.pop(id(loss), 1.0)
            self.losses.append(value if math.isfinite(value) else None)
            self.loss_forwards.append(len(self.forwards))  # read as a count at the end
            self.loss_groups.append(-1)
            self._unapplied.append(len(self.losses) - 1)
        self.emit(Event.BACKWARD, loss)

    def _on_grad(self, p: torch.Tensor, grad: torch.Tensor) -> None:
        owner = self._owners.get(id(p))
        if owner is not None:
            self._touched.add(owner)
        self.emit(Event.GRAD, p, grad)

    @safe
    def add_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        if not any(opt is optimizer for opt in self.optimizers):
            self.optimizers.append(optimizer)
        for p in optimizer.param_groups[-1]["params"]:
            self._owners.setdefault(id(p), id(optimizer))
            self.params.manage(p, self._on_grad)

    @safe
    def step_pre(self, optimizer: torch.optim.Optimizer, args: tuple = (), kwargs: dict | None = None):
        """An optimizer step begins. Without a closure its update is due now (UPDATE_PRE). With one
        (``step(closure)``: LBFGS, which evaluates it several times), the update is due once the closure's first
        call computed this step's gradients; its later calls (a line search) are one update's re-evaluations,
        not backward passes of their own. Returns the step's arguments with the closure observed, else None."""
        if self._step is not None:  # a nested step (an optimizer wrapping another) counts once
            return None
        self._check_manual_update()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self._step = Update(params, optimizer, self.current.index if self.current is not None else None)
        kwargs = kwargs or {}
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)  # args[0] is the optimizer
        if not callable(closure):
            self.emit(Event.UPDATE_PRE, self._step)
            return None
        self._closure_calls = 0
        step = self._step

        def observed_closure(*a: Any, **k: Any) -> Any:
            if self._step is step:
                self._closure_calls += 1
            result = closure(*a, **k)
            if self._step is step and self._closure_calls == 1:
                self.emit(Event.UPDATE_PRE, step)
            return result

        functools.update_wrapper(observed_closure, closure)
        if "closure" in kwargs:
            return args, {**kwargs, "closure": observed_closure}
        return (args[0], observed_closure, *args[2:]), kwargs

    @safe
    def step_post(self, optimizer: torch.optim.Optimizer) -> None:
        step = self._step
        if step is None or step.optimizer is not optimizer:
            return
        if self._closure_calls == 0:  # a closure step whose closure never ran: the update was due all the same
            self.emit(Event.UPDATE_PRE, step)
        self._step, self._closure_calls = None, -1
        self._count_update(id(optimizer))
        self.emit(Event.UPDATE_POST, step)

    @safe
    def scaler_skipped(self) -> None:
        """A GradScaler skipped its step for non-finite gradients: the update was due, and attempted."""
        self.scaler_skips += 1
        self._credit()

    @safe
    def before_clip(self) -> None:
        """A manual update made between the backward and this clip is seen before the clip, not after it."""
        self._check_manual_update()

    def _check_manual_update(self) -> None:
        changed = self.params.changed_by_hand()
        if not changed:
            return
        ids = {id(p) for p in changed}
        for key, ref in self._models.items():
            model = ref()
            params = [p for p in model.parameters() if p.requires_grad] if model is not None else []
            if key not in self._hand_models and any(id(p) in ids for p in params):
                self._hand_models.add(key)
                self._hand_trained |= {id(p) for p in params}
        update = Update(changed, None, self.current.index if self.current is not None else None)
        self.emit(Event.UPDATE_PRE, update)
        self.manual_updates += 1
        self._count_update(None)
        self.emit(Event.UPDATE_POST, update)

    def _credit(self) -> None:
        """An update applied the gradients of the training forwards since the last one: credit their passes."""
        recent = self.forwards[self._unsettled:]
        passes = {f.pass_index for f in recent if f.reached and f.pass_index is not None}
        for index in passes | ({self.current.index} if self.current is not None else set()):
            self.passes[index].updates += 1
        pending = [f.index for f in recent[-1:] if f.grad and not f.reached]  # a manual update is seen at the next backward
        self._unsettled = pending[0] if pending else len(self.forwards)

    def _count_update(self, updater: int | None) -> None:
        self._last_update_pass = self.current.index if self.current is not None else None
        if self.current is not None:
            self._train_loaders.add(self.current.loader)
        if self.updates == 0:
            self.backwards_before_first_update = self.backwards
        if updater != self._last_updater and self._last_updater is not None and self._backwards_since_update:
            self._alternations += 1
        self._last_updater = updater
        group = self._updaters.setdefault(updater, len(self._updaters))
        for index in self._unapplied:
            self.loss_groups[index] = group
        self._unapplied.clear()
        self.updates += 1
        self._backwards_since_update = 0
        self._credit()

    # -- the record ---------------------------------------------------------
    def _settle_backward(self) -> None:
        """The previous backward pass is over: did it reach the parameters of two optimizers?"""
        self._coupled = self._coupled or len(self._touched) >= 2
        self._touched.clear()

    def finish(self) -> None:
        """The script ended: account for a manual update made after the last backward."""
        self._settle_backward()
        self._check_manual_update()

    def summary(self, tampered: list[str]) -> RunFacts:
        train = self.training_loaders()
        params = self.trained_params()
        phases = [self.phase(f) for f in self.forwards]
        return RunFacts(
            passes=[PassFacts(p.loader, TRAIN if p.loader in train else EVAL, p.batches, p.updates) for p in self.passes],
            updates=self.updates,
            manual_updates=self.manual_updates,
            scaler_skips=self.scaler_skips,
            backwards=self.backwards,
            backwards_before_first_update=self.backwards_before_first_update,
            losses=self.losses,
            loss_forwards=self.reached_per_loss(),
            loss_groups=self.loss_groups,
            optimizers=sum(1 for opt in self.optimizers if id(opt) in self._updaters),
            adversarial=self._alternations >= 2 and self._coupled and self._disjoint_optimizers(),
            trained_params=len(params),
            params_finite=all(math.isfinite(total_norm([p])) for p in params),
            eval_forwards=phases.count(EVAL),
            observer_errors=self.errors,
            tampered=tampered,
            rank=self.rank,
            world=self.world,
            stopped=self.stopped_in_pass(),
        )

    def reached_per_loss(self) -> list[int]:
        """Per loss, the top-level forwards since the loss before it whose output a backward pass reached: how many
        forwards (steps of an episode, tokens of a sequence decoded one at a time) the loss sums."""
        counts, start = [], 0
        for end in self.loss_forwards:
            counts.append(sum(1 for f in self.forwards[start:end] if f.reached))
            start = end
        return counts

    def stopped_in_pass(self) -> dict | None:
        """Where training stopped, when its last update came in a DataLoader pass the script then left before its
        end (a ``break`` out of the training): ``{"pass", "epoch", "batches", "of"}``; None otherwise."""
        if self._last_update_pass is None:
            return None
        last = self.passes[self._last_update_pass]
        loader = last.ref() if last.ref is not None else None
        try:
            total = len(loader) if loader is not None else None
        except TypeError:  # an IterableDataset without a length
            total = None
        if last.exhausted or total is None or last.batches >= total:
            return None
        epoch = sum(1 for p in self.passes[:last.index + 1] if p.loader == last.loader and p.updates)
        return {"pass": last.index, "epoch": epoch, "batches": last.batches, "of": total}

    def _disjoint_optimizers(self) -> bool:
        used = [opt for opt in self.optimizers if id(opt) in self._updaters]
        seen: set[int] = set()
        for opt in used:
            ids = {id(p) for group in opt.param_groups for p in group["params"]}
            if ids & seen:
                return False
            seen |= ids
        return len(used) >= 2


def compiled_modes(module: nn.Module) -> set[str]:
    """"active" / "inactive" from the dropout and batch-norm layers inside a compiled model, by their flags."""
    found = set()
    for m in module._orig_mod.modules():
        dropout = isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0
        batchnorm = isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
        if dropout or batchnorm:
            found.add("active" if m.training else "inactive")
    return found
