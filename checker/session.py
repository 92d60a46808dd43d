"""The observer inside the checked process.

One set of global PyTorch hooks and a few wrapped entry points turn the running
script into a stream of events that probes subscribe to:

=============  ==============================================================
event          arguments
=============  ==============================================================
``batch``      the batch a DataLoader just yielded (``session.current`` is its pass)
``module``     a module about to run (every module, every call)
``output``     ``(module, output)`` of a top-level module call that is not a loss
``backward``   the tensor handed to ``backward()``
``grad``       ``(param, grad)``: a gradient contribution to a trained parameter, before it is
               added to ``.grad`` (every parameter an optimizer holds is hooked once)
``step_pre``   a :class:`Step` just before ``optimizer.step()`` updates anything
``step_post``  the same :class:`Step` after the update
``clip``       ``(params, max_norm, norm_type, total_norm)`` of ``clip_grad_norm_``
``mode``       ``(kind, training)`` for each dropout or batch-norm computation
``scheduler``  a learning-rate scheduler, right after it was constructed
=============  ==============================================================

The *phase* of a batch is decided by the program's behaviour, not by names: a
DataLoader that ever feeds an optimizer step or a backward pass is a training
loader, every other one is an evaluation loader.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.optim import lr_scheduler
from torch.optim import optimizer as optimizer_hooks
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import DataLoader

from checker import workers

DROPOUT_FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


@dataclass
class Pass:
    """One iteration over a DataLoader (usually: one epoch of it)."""

    index: int
    loader: int
    batches: int = 0
    steps: int = 0
    backwards: int = 0


@dataclass
class Step:
    """An optimizer step in progress."""

    index: int
    optimizer: torch.optim.Optimizer
    pass_index: int | None

    @functools.cached_property
    def params(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    @functools.cached_property
    def grad_norm(self) -> float:
        """Total 2-norm of the gradients this step is about to apply."""
        return total_norm([p.grad for p in self.params if p.grad is not None])


def total_norm(tensors: list[torch.Tensor], norm_type: float = 2.0) -> float:
    if not tensors:
        return 0.0
    norms = torch.stack([torch.linalg.vector_norm(t.detach().float(), norm_type).to(tensors[0].device) for t in tensors])
    return float(torch.linalg.vector_norm(norms, norm_type))


class Sentinel:
    """A weak-referenceable token that dies exactly when the graph node holding it dies."""


def watch_graph(tensor: torch.Tensor, on_death: Callable[[], None]) -> bool:
    """Call ``on_death`` when the autograd node that produced ``tensor`` is freed."""
    node = tensor.grad_fn
    if node is None:
        return False
    sentinel = Sentinel()
    node.metadata.setdefault("kata_sentinels", []).append(sentinel)
    weakref.finalize(sentinel, on_death)
    return True


@dataclass
class Session:
    channel_dir: str
    heartbeat: str | None = None
    passes: list[Pass] = field(default_factory=list)
    current: Pass | None = None
    batch_index: int = -1
    labels: torch.Tensor | None = None
    steps: int = 0
    backwards: int = 0
    backwards_before_first_step: int | None = None
    losses: list[float | None] = field(default_factory=list)
    loss_passes: list[int | None] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    _listeners: dict[str, list[tuple[str, Callable]]] = field(default_factory=lambda: defaultdict(list))
    _loaders: dict[int, int] = field(default_factory=dict)
    _loader_refs: list[DataLoader] = field(default_factory=list)
    _depth: int = 0
    _step: Step | None = None
    _quiet: bool = False
    _last_beat: float = 0.0
    _patched: list = field(default_factory=list)
    _hooks: list = field(default_factory=list)
    _hooked: set[int] = field(default_factory=set)

    # -- subscription -------------------------------------------------------
    def on(self, event: str, owner: str, callback: Callable) -> None:
        self._listeners[event].append((owner, callback))

    def emit(self, event: str, *args: Any) -> None:
        if self._quiet:
            return
        for owner, callback in self._listeners[event]:
            if owner in self.errors:
                continue
            try:
                callback(*args)
            except Exception as exc:  # a probe's bug must never break the user's script
                self.errors[owner] = f"{type(exc).__name__}: {exc}"

    @contextlib.contextmanager
    def quiet(self):
        """Work done by the checker itself (e.g. replaying a schedule) is not observed."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    # probes reach these through the session, so that their modules need not import torch
    total_norm = staticmethod(total_norm)
    watch_graph = staticmethod(watch_graph)

    # -- phase --------------------------------------------------------------
    def training_loaders(self) -> set[int]:
        return {p.loader for p in self.passes if p.steps or p.backwards}

    def role(self, pass_index: int | None) -> str | None:
        """"train", "eval", or None for work done outside any DataLoader pass."""
        if pass_index is None:
            return None
        return "train" if self.passes[pass_index].loader in self.training_loaders() else "eval"

    def trained_params(self) -> list[torch.Tensor]:
        seen: dict[int, torch.Tensor] = {}
        for opt in self.optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    if p.requires_grad:
                        seen.setdefault(id(p), p)
        return list(seen.values())

    def summary(self) -> dict:
        train = self.training_loaders()
        params = self.trained_params()
        return {
            "passes": [
                {"loader": p.loader, "role": "train" if p.loader in train else "eval",
                 "batches": p.batches, "steps": p.steps, "backwards": p.backwards}
                for p in self.passes
            ],
            "dataloaders": len(self._loaders),
            "steps": self.steps,
            "backwards": self.backwards,
            "backwards_before_first_step": self.backwards_before_first_step,
            "losses": self.losses,
            "loss_passes": self.loss_passes,
            "trained_params": len(params),
            "params_finite": all(math.isfinite(total_norm([p])) for p in params),
            "observer_errors": self.errors,
            "tampered": self.tampering(),
        }

    # -- instrumentation ----------------------------------------------------
    def install(self) -> None:
        self._hook(module_hooks, "_global_forward_pre_hooks", module_hooks.register_module_forward_pre_hook(self._module_pre))
        self._hook(module_hooks, "_global_forward_hooks",
                   module_hooks.register_module_forward_hook(self._module_post, always_call=True))
        self._hook(optimizer_hooks, "_global_optimizer_pre_hooks", register_optimizer_step_pre_hook(self._step_pre))
        self._hook(optimizer_hooks, "_global_optimizer_post_hooks", register_optimizer_step_post_hook(self._step_post))
        self._wrap(torch.autograd, "backward", self._before_backward)
        self._wrap_add_param_group()
        self._wrap_dataloader()
        self._wrap_clip()
        self._wrap_mode_functions()
        self._wrap_schedulers()

    def _wrap(self, owner: Any, name: str, before: Callable) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before(*args, **kwargs)
            return original(*args, **kwargs)

        self._patch(owner, name, wrapper)

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        setattr(owner, name, replacement)
        self._patched.append((owner, name, replacement))

    def _hook(self, owner: Any, registry: str, handle: Any) -> None:
        self._hooks.append((owner, registry, getattr(owner, registry), handle.id))

    def tampering(self) -> list[str]:
        """What of the instrumentation the script removed or replaced (empty when intact)."""
        found = [f"{getattr(owner, '__name__', owner)}.{registry}" for owner, registry, hooks, hook_id in self._hooks
                 if getattr(owner, registry) is not hooks or hook_id not in hooks]
        found += [f"{getattr(owner, '__qualname__', getattr(owner, '__name__', owner))}.{name}"
                  for owner, name, replacement in self._patched if vars(owner).get(name) is not replacement]
        return found

    def beat(self) -> None:
        """Tell the watchdog the script is making progress (at most twice a second)."""
        now = time.monotonic()
        if self.heartbeat and now - self._last_beat > 0.5:
            self._last_beat = now
            with open(self.heartbeat, "a"):
                pass
            os.utime(self.heartbeat)

    def _module_pre(self, module: nn.Module, args: Any) -> None:
        self._depth += 1
        self.emit("module", module)

    def _module_post(self, module: nn.Module, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and not isinstance(module, nn.modules.loss._Loss):
            self.beat()
            self.emit("output", module, output)

    def _before_backward(self, tensors: Any, *args: Any, **kwargs: Any) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) else tensors
        self.backwards += 1
        self.beat()
        if self.current is not None:
            self.current.backwards += 1
        if loss.numel() == 1:  # losses as JSON-safe floats; None marks a NaN or infinite loss
            value = float(loss.detach().float())
            self.losses.append(value if math.isfinite(value) else None)
            self.loss_passes.append(self.current.index if self.current is not None else None)
        self.emit("backward", loss)

    def _step_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._step is not None:  # a nested step (an optimizer wrapping another) counts once
            return
        index = self.current.index if self.current is not None else None
        self._step = Step(self.steps, optimizer, index)
        self.emit("step_pre", self._step)

    def _step_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        step = self._step
        if step is None or step.optimizer is not optimizer:
            return
        self._step = None
        if self.steps == 0:
            self.backwards_before_first_step = self.backwards
        self.steps += 1
        if self.current is not None:
            self.current.steps += 1
        self.emit("step_post", step)

    def _wrap_add_param_group(self) -> None:
        original = torch.optim.Optimizer.add_param_group
        session = self

        @functools.wraps(original)
        def add_param_group(optimizer: torch.optim.Optimizer, param_group: dict) -> None:
            original(optimizer, param_group)
            if session._quiet:
                return
            if not any(opt is optimizer for opt in session.optimizers):
                session.optimizers.append(optimizer)
            for p in optimizer.param_groups[-1]["params"]:
                session.hook_gradients(p)

        self._patch(torch.optim.Optimizer, "add_param_group", add_param_group)

    def _wrap_dataloader(self) -> None:
        original = DataLoader.__iter__
        session = self

        @functools.wraps(original)
        def __iter__(loader: DataLoader):
            key = session._loaders.setdefault(id(loader), len(session._loaders))
            if len(session._loader_refs) <= key:
                session._loader_refs.append(loader)  # keeps id() unique for the whole run
            observed = Pass(len(session.passes), key)
            session.passes.append(observed)
            with workers.observed(loader, session.channel_dir, key, observed.index):
                iterator = original(loader)
            return ObservedIterator(iterator, session, observed, loader)

        self._patch(DataLoader, "__iter__", __iter__)

    def hook_gradients(self, param: torch.Tensor) -> None:
        if id(param) in self._hooked or not param.requires_grad:
            return
        self._hooked.add(id(param))
        ref = weakref.ref(param)

        def on_gradient(grad: torch.Tensor) -> None:
            p = ref()
            if p is not None:
                self.emit("grad", p, grad)

        param.register_hook(on_gradient)

    def start_batch(self, observed: Pass, batch: Any) -> None:
        self.current = observed
        observed.batches += 1
        self.batch_index += 1
        self._depth = 0
        self.labels = find_labels(batch)
        self.beat()
        self.emit("batch", batch)

    def _wrap_clip(self) -> None:
        from torch.nn.utils import clip_grad

        original = clip_grad.clip_grad_norm_
        session = self

        @functools.wraps(original)
        def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2.0, *args: Any, **kwargs: Any):
            params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            norm = original(params, max_norm, norm_type, *args, **kwargs)
            session.emit("clip", params, float(max_norm), float(norm_type), float(norm))
            return norm

        self._patch(clip_grad, "clip_grad_norm_", clip_grad_norm_)
        self._patch(torch.nn.utils, "clip_grad_norm_", clip_grad_norm_)

    def _wrap_mode_functions(self) -> None:
        session = self

        def observe_dropout(original: Callable) -> Callable:
            @functools.wraps(original)
            def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, *args: Any, **kwargs: Any):
                if p > 0:
                    session.emit("mode", "dropout", bool(training))
                return original(input, p, training, *args, **kwargs)

            return dropout

        for name in DROPOUT_FUNCTIONS:
            self._patch(F, name, observe_dropout(getattr(F, name)))

        original_bn = F.batch_norm

        @functools.wraps(original_bn)
        def batch_norm(input: torch.Tensor, running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                       *args: Any, **kwargs: Any):
            if running_mean is not None:  # without running statistics, train and eval behave alike
                training = kwargs.get("training", args[2] if len(args) > 2 else False)
                session.emit("mode", "batchnorm", bool(training))
            return original_bn(input, running_mean, running_var, *args, **kwargs)

        self._patch(F, "batch_norm", batch_norm)

    def _wrap_schedulers(self) -> None:
        for cls in vars(lr_scheduler).values():
            if isinstance(cls, type) and issubclass(cls, lr_scheduler.LRScheduler) and "__init__" in vars(cls):
                self._patch(cls, "__init__", self._observed_init(cls.__init__))

    def _observed_init(self, original: Callable) -> Callable:
        session = self

        @functools.wraps(original)
        def __init__(scheduler: Any, *args: Any, **kwargs: Any) -> None:
            if hasattr(scheduler, "_kata_spec"):  # a base class's __init__ under the outermost one
                return original(scheduler, *args, **kwargs)
            optimizer = kwargs.get("optimizer", args[0] if args else None)
            scheduler._kata_spec = SchedulerSpec(type(scheduler), args, kwargs, optimizer)
            original(scheduler, *args, **kwargs)
            session.emit("scheduler", scheduler)

        return __init__


class ObservedIterator:
    """Wraps a DataLoader iterator: marks pass and batch boundaries, then gets out of the way."""

    def __init__(self, inner: Any, session: Session, observed: Pass, loader: DataLoader):
        self._inner, self._session, self._pass = inner, session, observed
        self._rng_probe = workers.MainProcessProbe(loader, session.channel_dir, observed.loader, observed.index)

    def __iter__(self) -> "ObservedIterator":
        return self

    def __next__(self) -> Any:
        self._rng_probe.before_fetch()
        try:
            batch = next(self._inner)
        except StopIteration:
            if self._session.current is self._pass:
                self._session.current = None
            raise
        self._rng_probe.after_fetch()
        self._session.start_batch(self._pass, batch)
        return batch

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class SchedulerSpec:
    """How a scheduler was built, and the optimizer's hyper-parameters before it touched them."""

    cls: type
    args: tuple
    kwargs: dict
    optimizer: torch.optim.Optimizer | None
    groups: list[dict] = field(init=False)
    defaults: dict = field(init=False)

    def __post_init__(self) -> None:
        opt = self.optimizer
        self.groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] if opt else []
        self.defaults = dict(opt.defaults) if opt else {}


def find_labels(batch: Any) -> torch.Tensor | None:
    """The batch's class labels: its last one-dimensional integral tensor (``(x, y)`` → ``y``)."""
    if isinstance(batch, dict):
        candidates = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        candidates = list(batch)
    else:
        return None
    for item in reversed(candidates):
        if isinstance(item, torch.Tensor) and item.dim() >= 1 and item.numel() == item.shape[0] and len(candidates) > 1:
            if not item.dtype.is_floating_point or bool(torch.all(item == item.round())):
                return item.reshape(-1)
    return None
