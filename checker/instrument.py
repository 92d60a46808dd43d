"""Where the observed run meets PyTorch: global hooks and a few wrapped entry points, all feeding a Session.

Every wrapper calls the original with exactly the arguments it was given and
reads those arguments through the original's own signature, so defaults (e.g.
``F.alpha_dropout``'s ``training=False``) never change. Inside code that
``torch.compile`` traces, the wrappers and hooks only call through, so that they
add no guards and no graph breaks. What was installed is
remembered, so that a script that removes or replaces it can be told apart.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import operator
import os
import sys
import threading
import time
import weakref
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.amp import grad_scaler
from torch.nn.modules import module as module_hooks
from torch.optim import lr_scheduler
from torch.optim import optimizer as optimizer_hooks
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _DatasetKind

from checker import workers
from checker.clock import BACKWARD, CHECKER, DATA, OPTIMIZER
from checker.distributed import COLLECTIVE, launched
from checker.events import Event, LossCall, Order, Pass
from checker.mirror import SAVE_EVENT
from checker.session import Session

DROPOUT_FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
KEPT_INDEX_BATCHES = 8  # index batches of a pass kept in full (the rest only in the pass's digest)
KEPT_INDICES = 200_000  # indices of a pass kept in full in a distributed run, to compare the ranks' shards
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "barrier", "monitored_barrier",
               "broadcast", "broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather",
               "gather_object", "scatter", "scatter_object_list", "all_to_all", "all_to_all_single", "send", "recv")
INIT_FUNCTIONS = ("constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_",
                  "orthogonal_", "sparse_", "trunc_normal_", "uniform_", "xavier_normal_", "xavier_uniform_", "zeros_")
LOSS_FUNCTIONS = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss",
                  "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "gaussian_nll_loss", "poisson_nll_loss")


class Instrumentation:
    def __init__(self, session: Session):
        self.session = session
        self.patches = session.patches
        self._loaders: dict[int, int] = {}
        self._loader_refs: list[DataLoader] = []  # keeps id() unique for the whole run
        self._latest: dict[int, Pass] = {}  # id() of a DataLoader -> the pass its latest iteration started
        self._with_workers: weakref.WeakSet = weakref.WeakSet()  # DataLoader iterators that started worker processes
        self._scheduler_init = 0
        self._stepping: list = []  # the schedulers whose step() is running, outermost first
        # The process groups the script made, held until the process ends: gloo's worker thread releases each finished
        # collective's thread state, which needs the interpreter's lock; a group freed while a collective is still being
        # released there (the last reference dropped in Python: DDP's reducer freed with its model) joins that thread
        # while holding the lock, and both wait for ever. The checker's own work between steps widens that window.
        self._groups: list = []

    def install(self) -> None:
        s = self.session
        self._hook(module_hooks, "_global_forward_pre_hooks",
                   module_hooks.register_module_forward_pre_hook(s.module_pre))
        self._hook(module_hooks, "_global_forward_hooks", module_hooks.register_module_forward_hook(
            s.module_post, always_call=True))
        self._hook(optimizer_hooks, "_global_optimizer_pre_hooks",
                   optimizer_hooks.register_optimizer_step_pre_hook(self._step_pre))
        self._hook(optimizer_hooks, "_global_optimizer_post_hooks",
                   optimizer_hooks.register_optimizer_step_post_hook(self._step_post))
        self._wrap_backward()
        self._wrap_add_param_group()
        self._wrap_dataloader()
        self._wrap_clip()
        self._wrap_mode_functions()
        self._wrap_losses()
        self._wrap_log_softmax()
        self._wrap_packing()
        self._wrap_distributions()
        self._wrap_autograd_grad()
        self._wrap_grad_scaler()
        self._wrap_schedulers()
        self._wrap_distributed()
        self._wrap_checkpoints()
        self._wrap_print()
        self._observe_construction()
        if launched():
            self._track_generators()

    def release_workers(self) -> None:
        """Shut down the worker processes of the DataLoader iterators still alive when the run ends, as deleting
        them would have when the script's own references went: the loaders are held here to the end. The workers
        then exit on their own and remove their temporary folders (a socket each) instead of being killed with the
        run's process group and leaving them behind."""
        for iterator in list(self._with_workers):
            shutdown = getattr(iterator, "_shutdown_workers", None)
            if shutdown is not None:
                try:
                    shutdown()
                except Exception:  # noqa: BLE001 - the record is written; a worker that will not stop is killed
                    pass

    def tampering(self) -> list[str]:
        """What of the checker's patches and hooks the script removed or replaced (empty when intact)."""
        return self.patches.tampering()

    # -- torch.distributed ----------------------------------------------------
    def _wrap_distributed(self) -> None:
        """Learn this process's rank when it joins a process group, and name the collective it waits in.

        The name goes to ``CHANNEL_DIR/collective`` on entry and is cleared on return, so that the
        ``kata`` process can say where a hung rank stopped; DDP's own gradient all-reduce runs in C++ and
        is not seen here."""
        if not torch.distributed.is_available():
            return
        dist = torch.distributed
        original_init = dist.init_process_group

        where = os.path.join(self.session.channel_dir, COLLECTIVE)

        @functools.wraps(original_init)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            result = waiting_in(original_init, "torch.distributed.init_process_group (the rendezvous)", where)(
                *args, **kwargs)
            self._joined()
            return result

        self._patch(dist, "init_process_group", init_process_group)
        for name in COLLECTIVES:
            if callable(getattr(dist, name, None)):
                self._patch(dist, name, waiting_in(getattr(dist, name), f"torch.distributed.{name}", where))

    def _joined(self) -> None:
        """Take this process's rank from the default process group, and hold the group to the end."""
        dist = torch.distributed
        self.session.rank, self.session.world = dist.get_rank(), dist.get_world_size()
        self._groups.append(dist.distributed_c10d._get_default_group())

    def _step_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        clock = self.session.clock
        if clock is None:
            return self.session.step_pre(optimizer, args, kwargs)
        clock.enter(OPTIMIZER)  # left when the step ends (_step_post)
        with clock.phase(CHECKER):
            return self.session.step_pre(optimizer, args, kwargs)

    def _step_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        # A script that took ``init_process_group`` by name before the checker was installed (a spawned rank imports
        # its module to find its target) joins unseen: its group is noticed at its first update instead.
        if self.session.rank is None and torch.distributed.is_available() and torch.distributed.is_initialized():
            self._joined()
        clock = self.session.clock
        if clock is None:
            self.session.step_post(optimizer)
            return
        clock.leave(OPTIMIZER)
        with clock.phase(CHECKER):
            self.session.step_post(optimizer)

    # -- plumbing -----------------------------------------------------------
    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self.patches.patch(owner, name, replacement)

    def _hook(self, owner: Any, registry: str, handle: Any) -> None:
        self.patches.hook(owner, registry, handle)

    def _wrap_backward(self) -> None:
        """``torch.autograd.backward`` (what ``loss.backward()`` calls): the ledger sees each backward pass begin; a
        profiled run's clock sees it begin and end."""
        original, session = torch.autograd.backward, self.session

        @functools.wraps(original)
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            loss = tensors[0] if isinstance(tensors, (tuple, list)) else tensors
            clock = session.clock
            if clock is None:
                session.before_backward(loss)
                return original(tensors, *args, **kwargs)
            with clock.phase(BACKWARD):
                with clock.phase(CHECKER):
                    session.before_backward(loss)
                return original(tensors, *args, **kwargs)

        self._patch(torch.autograd, "backward", backward)

    # -- optimizers, loaders, clipping ---------------------------------------
    def _wrap_add_param_group(self) -> None:
        original = torch.optim.Optimizer.add_param_group
        session = self.session

        @functools.wraps(original)
        def add_param_group(optimizer: torch.optim.Optimizer, param_group: dict) -> None:
            session.emit(Event.PARAM_GROUP, optimizer, param_group)
            original(optimizer, param_group)
            session.add_optimizer(optimizer)
            session.emit(Event.GROUP_ADDED, optimizer, optimizer.param_groups[-1])

        self._patch(torch.optim.Optimizer, "add_param_group", add_param_group)

    def _wrap_dataloader(self) -> None:
        original = DataLoader.__iter__
        instrumentation, session = self, self.session

        @functools.wraps(original)
        def __iter__(loader: DataLoader):
            key = instrumentation._loaders.setdefault(id(loader), len(instrumentation._loaders))
            if len(instrumentation._loader_refs) <= key:
                instrumentation._loader_refs.append(loader)
            began = time.perf_counter()
            observed = Pass(len(session.passes), key, ref=weakref.ref(loader))
            fresh = loader.num_workers > 0 and (not loader.persistent_workers or loader._iterator is None)
            observed.workers = loader.num_workers if fresh else 0
            session.passes.append(observed)
            instrumentation._latest[id(loader)] = observed
            # starting the workers is part of the wait for data
            waiting = session.clock.phase((DATA, key)) if session.clock is not None else contextlib.nullcontext()
            with waiting, workers.observed(loader, session.channel_dir, key, observed.index):
                iterator = original(loader)
            if loader.num_workers > 0:
                instrumentation._with_workers.add(iterator)
            return ObservedIterator(iterator, session, observed, loader, began)

        self._patch(DataLoader, "__iter__", __iter__)
        self._wrap_index_sampler()

    def _wrap_index_sampler(self) -> None:
        """The sampler a DataLoader iterator draws indices from is handed out wrapped, to record them."""
        original = DataLoader._index_sampler
        latest = self._latest

        def _index_sampler(loader: DataLoader) -> Any:
            sampler = original.fget(loader)
            if loader._dataset_kind != _DatasetKind.Map:  # an IterableDataset's "sampler" yields no indices
                return sampler
            return RecordedSampler(sampler, latest, id(loader))

        self._patch(DataLoader, "_index_sampler", property(_index_sampler))

    def _wrap_distributions(self) -> None:
        """``torch.distributions``: a ``sample()`` drawn, and a ``log_prob`` with gradients of a value that has none
        (the log-probability of an action sampled earlier, as a policy gradient scores it), counted on the session.
        Each distribution class defines its own methods: each one that does is wrapped."""
        import torch.distributions as distributions

        session = self.session

        def sampled(original: Callable) -> Callable:
            @functools.wraps(original)
            def sample(*args: Any, **kwargs: Any):
                session.sampled()
                return original(*args, **kwargs)
            return sample

        def scored(original: Callable) -> Callable:
            @functools.wraps(original)
            def log_prob(distribution: Any, value: Any, *args: Any, **kwargs: Any):
                result = original(distribution, value, *args, **kwargs)
                if isinstance(result, torch.Tensor) and result.requires_grad and isinstance(value, torch.Tensor) \
                        and not value.requires_grad:
                    session.scored()
                return result
            return log_prob

        classes = {id(c): c for c in vars(distributions).values() if isinstance(c, type)}
        for cls in classes.values():
            if issubclass(cls, distributions.Distribution):
                for name, wrap in (("sample", sampled), ("log_prob", scored)):
                    if name in vars(cls):
                        self.patches.patch(cls, name, wrap(vars(cls)[name]), watched=False)

    def _wrap_packing(self) -> None:
        """``pack_padded_sequence``: the padded batch goes on to a recurrent layer packed, its padding skipped."""
        from torch.nn.utils import rnn

        original, session = rnn.pack_padded_sequence, self.session

        @functools.wraps(original)
        def pack_padded_sequence(*args: Any, **kwargs: Any):
            session.emit(Event.PACKED)
            return original(*args, **kwargs)

        self._patch(rnn, "pack_padded_sequence", pack_padded_sequence)

    def _wrap_clip(self) -> None:
        from torch.nn.utils import clip_grad

        original = clip_grad.clip_grad_norm_
        read = arguments_of(original)
        session = self.session

        @functools.wraps(original)
        def clip_grad_norm_(*args: Any, **kwargs: Any):
            given = read(args, kwargs)
            params, args, kwargs = parameters_listed(given, args, kwargs)
            session.before_clip()
            norm = original(*args, **kwargs)
            session.emit(Event.CLIP, params, float(given["max_norm"]), float(given["norm_type"]), float(norm))
            return norm

        self._patch(clip_grad, "clip_grad_norm_", clip_grad_norm_)
        self._patch(torch.nn.utils, "clip_grad_norm_", clip_grad_norm_)

        original_value = clip_grad.clip_grad_value_
        read_value = arguments_of(original_value)

        @functools.wraps(original_value)
        def clip_grad_value_(*args: Any, **kwargs: Any):
            """Clipping by value: CLIP as a clip of the infinity norm (the largest element's size) at that value."""
            given = read_value(args, kwargs)
            params, args, kwargs = parameters_listed(given, args, kwargs)
            session.before_clip()
            measured = session.total_norm([p.grad for p in params if p.grad is not None], math.inf)
            result = original_value(*args, **kwargs)
            session.emit(Event.CLIP, params, float(given["clip_value"]), math.inf, measured)
            return result

        self._patch(clip_grad, "clip_grad_value_", clip_grad_value_)
        self._patch(torch.nn.utils, "clip_grad_value_", clip_grad_value_)

    # -- functions whose behaviour depends on the mode, and losses ----------------
    def _wrap_mode_functions(self) -> None:
        session = self.session

        def dropout(given: dict) -> None:
            if given["p"] > 0:
                session.mode("dropout", bool(given["training"]))

        def batch_norm(given: dict) -> None:
            if given["running_mean"] is not None:  # without running statistics, train and eval behave alike
                session.mode("batchnorm", bool(given["training"]))

        for name in DROPOUT_FUNCTIONS:
            self._patch(F, name, observing(getattr(F, name), dropout))
        self._patch(F, "batch_norm", observing(F.batch_norm, batch_norm))

    def _wrap_losses(self) -> None:
        session = self.session

        inside = threading.local()  # a loss called from inside a loss: a tensor subclass's __torch_function__
        # dispatches F.cross_entropy back to its public (patched) name; the outermost call is the script's

        def observe(name: str, original: Callable) -> Callable:
            read = arguments_of(original)

            @functools.wraps(original)
            def loss(*args: Any, **kwargs: Any):
                if getattr(inside, "loss", False):
                    return original(*args, **kwargs)
                inside.loss = True
                try:
                    output = original(*args, **kwargs)
                finally:
                    inside.loss = False
                if torch.compiler.is_compiling():
                    return output
                given = read(args, kwargs)
                forward = session.last_forward.index if session.last_forward is not None else None
                session.loss(LossCall(name, given["input"], given["target"], output, reduction_of(given), forward))
                return output

            return loss

        for name in LOSS_FUNCTIONS:
            if hasattr(F, name):
                self._patch(F, name, observe(name, getattr(F, name)))

    def _wrap_log_softmax(self) -> None:
        """``log_softmax`` as a function and as the method (``F.log_softmax`` calls the method: seen once)."""
        session = self.session

        def observed(original: Callable) -> Callable:
            @functools.wraps(original)
            def log_softmax(input: Any, *args: Any, **kwargs: Any) -> Any:
                if not torch.compiler.is_compiling() and session.listening(Event.LOG_SOFTMAX):
                    dim = kwargs.get("dim", args[0] if args else None)
                    session.emit(Event.LOG_SOFTMAX, input, dim)
                return original(input, *args, **kwargs)

            return log_softmax

        self._patch(torch.Tensor, "log_softmax", observed(torch.Tensor.log_softmax))
        self._patch(torch, "log_softmax", observed(torch.log_softmax))

    def _wrap_autograd_grad(self) -> None:
        """``torch.autograd.grad``: what it differentiated with respect to, and what it returned (an inner
        optimisation step's gradient, a gradient penalty's); while it runs, ``session.autograd_grads`` says so (the
        gradient hooks it fires write no ``.grad``)."""
        session = self.session
        original = torch.autograd.grad
        read = arguments_of(original)

        @functools.wraps(original)
        def grad(*args: Any, **kwargs: Any) -> Any:
            session.autograd_grads += 1
            try:
                return observed(*args, **kwargs)
            finally:
                session.autograd_grads -= 1

        def observed(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling() or not session.listening(Event.AUTOGRAD_GRAD):
                return original(*args, **kwargs)
            inputs = read(args, kwargs)["inputs"]
            if not isinstance(inputs, (torch.Tensor, tuple, list)) and hasattr(inputs, "__iter__"):
                # a generator (``model.parameters()``) is read once; grad reads it as a tuple all the same
                inputs = tuple(inputs)
                if "inputs" in kwargs:
                    kwargs = {**kwargs, "inputs": inputs}
                else:
                    args = (*args[:1], inputs, *args[2:])
            result = original(*args, **kwargs)
            given = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
            session.emit(Event.AUTOGRAD_GRAD, given, tuple(result))
            return result

        self._patch(torch.autograd, "grad", grad)

    # -- mixed precision and schedulers ------------------------------------
    def _wrap_grad_scaler(self) -> None:
        scaler_class = grad_scaler.GradScaler
        original_scale, original_step = scaler_class.scale, scaler_class.step
        session = self.session

        @functools.wraps(original_scale)
        def scale(scaler: Any, outputs: Any) -> Any:
            scaled = original_scale(scaler, outputs)
            if isinstance(scaled, torch.Tensor) and scaled is not outputs and scaler.is_enabled():
                session.scaled(scaled, float(scaler.get_scale()))
            return scaled

        @functools.wraps(original_step)
        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            before = session.updates
            result = original_step(scaler, optimizer, *args, **kwargs)
            if session.updates == before and scaler.is_enabled():
                session.scaler_skipped()
            return result

        self._patch(scaler_class, "scale", scale)
        self._patch(scaler_class, "step", step)

    def _wrap_schedulers(self) -> None:
        """Observe schedulers through their classes, never an attribute on the instance: an instance attribute
        lands in ``scheduler.state_dict()`` (which copies ``__dict__``), cannot be pickled by ``torch.save``, and
        ``load_state_dict`` would replace a resumed scheduler's observed step with the saved one's."""
        for cls in vars(lr_scheduler).values():
            if isinstance(cls, type) and issubclass(cls, lr_scheduler.LRScheduler):
                if "__init__" in vars(cls):
                    self._patch(cls, "__init__", self._observed_init(cls.__init__))
                if "step" in vars(cls):
                    self._patch(cls, "step", self._observed_step(cls.step))

    def _observed_init(self, original: Callable) -> Callable:
        instrumentation = self

        @functools.wraps(original)
        def __init__(scheduler: Any, *args: Any, **kwargs: Any) -> None:
            if instrumentation._scheduler_init:  # a base class's __init__ under the outermost one
                return original(scheduler, *args, **kwargs)
            instrumentation._scheduler_init += 1
            try:
                original(scheduler, *args, **kwargs)
            finally:
                instrumentation._scheduler_init -= 1
            instrumentation._observe_subclass_steps(type(scheduler))
            instrumentation.session.emit(Event.SCHEDULER, scheduler)

        return __init__

    def _observe_subclass_steps(self, cls: type) -> None:
        """A scheduler class of the script's own that overrides ``step`` is observed like torch's."""
        for klass in cls.__mro__:
            if klass.__module__ == lr_scheduler.__name__ or klass is object:
                continue
            step = vars(klass).get("step")
            if callable(step) and not getattr(step, "_kata_observed", False):
                self._patch(klass, "step", self._observed_step(step))

    def _observed_step(self, original: Callable) -> Callable:
        instrumentation = self

        @functools.wraps(original)
        def step(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            if instrumentation._scheduler_init or any(s is scheduler for s in instrumentation._stepping):
                return original(scheduler, *args, **kwargs)  # construction, or a super().step() of the same one
            nested = bool(instrumentation._stepping)  # stepped by another scheduler (SequentialLR...)
            before = getattr(scheduler, "last_epoch", None)
            instrumentation._stepping.append(scheduler)
            try:
                return original(scheduler, *args, **kwargs)
            finally:
                instrumentation._stepping.pop()
                instrumentation.session.emit(Event.SCHEDULER_STEP, scheduler, nested, before)

        step._kata_observed = True
        return step


    # -- checkpoints, printed output, how models are built -------------------------
    def _wrap_checkpoints(self) -> None:
        """``torch.save`` (SAVE, after it wrote) and ``Module.load_state_dict`` (LOAD_STATE, after it returned)."""
        import torch.serialization

        session = self.session
        original_save, original_load = torch.save, torch.nn.Module.load_state_dict

        @functools.wraps(original_save)
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(f, (str, bytes, os.PathLike)):
                sys.audit(SAVE_EVENT, f)  # C++ opens the file: the scratch folder's copy first (checker.mirror)
            result = original_save(obj, f, *args, **kwargs)
            session.emit(Event.SAVE, obj, f)
            return result

        @functools.wraps(original_load)
        def load_state_dict(module: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            result = original_load(module, state_dict, *args, **kwargs)
            if not torch.compiler.is_compiling():
                session.emit(Event.LOAD_STATE, module, state_dict, result)
            return result

        self._patch(torch, "save", save)
        self._patch(torch.serialization, "save", save)
        self._patch(torch.nn.Module, "load_state_dict", load_state_dict)

    def _wrap_print(self) -> None:
        """``print`` writes exactly what it would, to where it would; PRINT gets a copy of the text."""
        import builtins
        import sys

        session, original = self.session, builtins.print

        @functools.wraps(original)
        def print(*args: Any, **kwargs: Any) -> None:
            target = kwargs.get("file")
            target = sys.stdout if target is None else target
            if target is None or torch.compiler.is_compiling() or not session.listening(Event.PRINT):
                return original(*args, **kwargs)
            tee = Tee(target)
            original(*args, **{**kwargs, "file": tee})
            session.emit(Event.PRINT, "".join(tee.written))

        self._patch(builtins, "print", print)

    def _observe_construction(self) -> None:
        """Where parameters' values come from: registrations (REGISTERED, ATTACHED, global hooks), the
        ``torch.nn.init`` functions (INIT) and ``from_pretrained`` (PRETRAINED)."""
        session = self.session

        def registered(module: Any, name: str, param: Any) -> None:
            session.emit(Event.REGISTERED, module, name, param)

        def attached(parent: Any, name: str, module: Any) -> None:
            session.emit(Event.ATTACHED, parent, name, module)

        self._hook(module_hooks, "_global_parameter_registration_hooks",
                   module_hooks.register_module_parameter_registration_hook(registered))
        self._hook(module_hooks, "_global_module_registration_hooks",
                   module_hooks.register_module_module_registration_hook(attached))

        def after(original: Callable, event: Event) -> Callable:
            """``original``, then ``event`` with what it returned: the tensor an init function filled, the module
            ``from_pretrained`` built."""
            @functools.wraps(original)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if not torch.compiler.is_compiling():
                    session.emit(event, result)
                return result

            return wrapper

        for name in INIT_FUNCTIONS:
            if hasattr(torch.nn.init, name):
                self._patch(torch.nn.init, name, after(getattr(torch.nn.init, name), Event.INIT))
        for cls in (torch.nn.Embedding, torch.nn.EmbeddingBag):
            self._patch(cls, "from_pretrained", classmethod(after(cls.from_pretrained.__func__, Event.PRETRAINED)))

    def _track_generators(self) -> None:
        """In a rank of a distributed run: ``torch.Generator`` becomes a subclass that tells GENERATOR where the
        script made each one (``isinstance`` and ``issubclass`` keep working)."""
        import sys

        original, session = torch.Generator, self.session
        checker = os.path.dirname(os.path.abspath(__file__))
        skip = (os.path.dirname(torch.__file__) + os.sep, checker + os.sep)

        class Meta(type(original)):
            def __instancecheck__(cls, instance: Any) -> bool:
                return isinstance(instance, original)

            def __subclasscheck__(cls, subclass: type) -> bool:
                return issubclass(subclass, original)

        class Generator(original, metaclass=Meta):
            def __new__(cls, *args: Any, **kwargs: Any) -> Any:
                generator = original.__new__(cls, *args, **kwargs)
                frame = sys._getframe(1)
                if not frame.f_code.co_filename.startswith(skip):
                    session.emit(Event.GENERATOR, generator,
                                 f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
                return generator

            def __init__(self, *args: Any, **kwargs: Any) -> None:  # construction happens in __new__
                pass

        Generator.__name__, Generator.__qualname__, Generator.__module__ = "Generator", "Generator", "torch"
        self._patch(torch, "Generator", Generator)


class Tee:
    """A file that writes through to ``target`` and keeps a copy of what was written."""

    def __init__(self, target: Any):
        self.target, self.written = target, []

    def write(self, text: str) -> Any:
        self.written.append(text)
        return self.target.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def parameters_listed(given: dict, args: tuple, kwargs: dict) -> tuple[list, tuple, dict]:
    """A clip's ``parameters`` (a tensor, or an iterable a generator may give only once) as a list, and the call's
    arguments with that list in its place."""
    parameters = given["parameters"]
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    args = (params, *args[1:]) if args else args
    kwargs = {**kwargs, "parameters": params} if "parameters" in kwargs else kwargs
    return params, args, kwargs


class ObservedIterator:
    """Wraps a DataLoader iterator: marks pass and batch boundaries, then gets out of the way."""

    def __init__(self, inner: Any, session: Session, observed: Pass, loader: DataLoader, began: float):
        self._inner, self._session, self._pass, self._began = inner, session, observed, began
        self._rng_probe = workers.MainProcessProbe(loader, session.channel_dir, observed.loader, observed.index)

    def __iter__(self) -> "ObservedIterator":
        return self

    def __next__(self) -> Any:
        self._session.stop_if_due("batch", self._pass)
        self._rng_probe.before_fetch()
        clock = self._session.clock
        if clock is not None:
            clock.enter((DATA, self._pass.loader))
        asked = time.perf_counter()
        try:
            batch = next(self._inner)
        except StopIteration:
            self._pass.span_s = time.perf_counter() - self._began
            self._session.end_pass(self._pass)
            raise
        finally:
            if clock is not None:
                clock.leave((DATA, self._pass.loader))
        got = time.perf_counter()
        self._pass.fetched += 1
        if self._pass.start_s:  # the time the iterator took to hand out a later batch
            self._pass.wait_s += got - asked
        else:
            self._pass.start_s = got - self._began
        self._pass.span_s = got - self._began
        self._rng_probe.after_fetch()
        self._session.start_batch(self._pass, batch)
        return batch

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordedSampler:
    """A DataLoader's (batch) sampler, whose iterations record the indices they yield into the latest pass."""

    def __init__(self, inner: Any, latest: dict[int, Pass], loader: int):
        self._inner, self._latest, self._loader = inner, latest, loader

    def __iter__(self) -> Any:
        iterator = iter(self._inner)  # drawn now, as the DataLoader would: the script's random draws keep their order
        observed = self._latest.get(self._loader)
        if observed is None:
            return iterator
        observed.order = Order(drawn=[] if distributed() else None)
        return RecordingIterator(iterator, observed.order)

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingIterator:
    def __init__(self, inner: Any, order: Order):
        self._inner, self._order = inner, order  # None once recording failed

    def __iter__(self) -> "RecordingIterator":
        return self

    def __next__(self) -> Any:
        drawn = next(self._inner)
        if self._order is not None:
            try:
                record(self._order, drawn)
            except Exception:  # never break the script's loading: stop recording, and leave no partial order
                self._order.head.clear()
                self._order.batches = self._order.indices = 0
                self._order.drawn = None
                self._order = None
        return drawn


def record(order: Order, drawn: Any) -> None:
    """Add an index batch (or one index, without automatic batching) to a pass's order."""
    items = drawn.tolist() if hasattr(drawn, "tolist") else drawn  # a tensor or an array of indices
    if not isinstance(items, (list, tuple)):
        items = [items]
    try:
        key = tuple(map(operator.index, items))
    except TypeError:  # keys that are not integers (a dict-like dataset's)
        key = tuple(map(repr, items))
    order.batches += 1
    order.indices += len(key)
    order.digest = hash((order.digest, key))
    if len(order.head) < KEPT_INDEX_BATCHES:
        order.head.append(list(key))
    if order.drawn is not None and len(order.drawn) < KEPT_INDICES:
        order.drawn.extend(key)


def distributed() -> bool:
    """Whether this process is a rank of an initialised process group."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def waiting_in(collective: Callable, name: str, where: str) -> Callable:
    """``collective``, with ``name`` in the file ``where`` while it runs."""

    @functools.wraps(collective)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _write(where, name)
        try:
            return collective(*args, **kwargs)
        finally:
            _write(where, "")

    return wrapper


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


def observing(original: Callable, look: Callable[[dict], None]) -> Callable:
    """``original``, calling ``look(arguments by name)`` first, except inside code torch.compile traces."""
    read = arguments_of(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not torch.compiler.is_compiling():
            look(read(args, kwargs))
        return original(*args, **kwargs)

    return wrapper


def arguments_of(function: Callable) -> Callable[[tuple, dict], dict]:
    """A reader of a call's arguments by name, with the function's own defaults filled in."""
    parameters = list(inspect.signature(function).parameters.values())
    names = [p.name for p in parameters]
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}

    def read(args: tuple, kwargs: dict) -> dict:  # called on every dropout and loss: no Signature.bind
        given = dict(defaults)
        given.update(zip(names, args))
        given.update(kwargs)
        return given

    return read


def reduction_of(given: dict) -> str:
    """The effective reduction, legacy ``size_average`` / ``reduce`` included."""
    if given.get("reduce") is False:
        return "none"
    if given.get("size_average") is False:
        return "sum"
    return given.get("reduction", "mean")
