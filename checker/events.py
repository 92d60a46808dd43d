"""The events the observed run is turned into, and the records they carry.

Probes subscribe to :class:`Event` members, never to strings, so a mistyped
event is an ``AttributeError`` at import instead of a subscription that never
fires. The records are plain dataclasses; this module does not import torch.

==================  ==========================================================
event               arguments
==================  ==========================================================
``BATCH``           the batch a DataLoader just yielded (``session.current`` is its pass, whose ``order``
                    holds the indices its sampler drew)
``PASS_END``        the :class:`Pass` whose DataLoader iterator just ran out
``FORWARD``         a :class:`Forward` that just started (a top-level module call)
``FORWARD_END``     ``(forward, output)`` once that call returned
``MODULE``          a module about to run (every module, every call)
``BACKWARD``        the tensor handed to ``backward()``
``GRAD``            ``(param, grad)``: a gradient contribution to a parameter, before it is added to ``.grad``
``UPDATE_PRE``      an :class:`Update` about to change parameters (``optimizer.step()``), or one a
                    manual update already made (seen at the next backward, ``update.manual``)
``UPDATE_POST``     the same :class:`Update` after it
``CLIP``            ``(params, max_norm, norm_type, total_norm)`` of ``clip_grad_norm_`` (``clip_grad_value_``: its
                    value as the max norm of type inf, the largest element before it as the total)
``MODE``            ``(kind, training)`` for each dropout or batch-norm computation
``LOSS``            a :class:`LossCall` of a loss function of ``torch.nn.functional``
``SCHEDULER``       a learning-rate scheduler, right after it was constructed
``SCHEDULER_STEP``  ``(scheduler, nested, before)``: a scheduler's ``step()`` (nested: called by another scheduler;
                    before: its step count, ``last_epoch``, before the call)
``PARAM_GROUP``     ``(optimizer, group)``: a parameter group as the script gave it, before the optimizer fills in
                    its defaults
``GROUP_ADDED``     ``(optimizer, group)``: the same group as the optimizer holds it, right after it was added
                    (its ``params`` a list)
``SAVE``            ``(obj, f)``: what ``torch.save`` just wrote, and where
``LOAD_STATE``      ``(module, state_dict, result)``: a ``Module.load_state_dict`` call that just returned
``PRINT``           the text a ``print`` call just wrote
``REGISTERED``      ``(module, name, param)``: a parameter about to be set on a module (``module._parameters``
                    still holds what it replaces)
``ATTACHED``        ``(parent, name, module)``: a submodule about to be set on a module
``INIT``            the tensor a ``torch.nn.init`` function just filled
``PRETRAINED``      the module ``Embedding.from_pretrained`` (or ``EmbeddingBag``'s) just built
``GENERATOR``       ``(generator, where)``: a ``torch.Generator`` the script made, and its line (ranks only)
``LOG_SOFTMAX``     ``(input, dim)``: a ``log_softmax`` (``F.log_softmax``, ``torch.log_softmax``, the method)
``AUTOGRAD_GRAD``   ``(inputs, grads)``: a ``torch.autograd.grad`` call that just returned: the tensors it took
                    the gradient with respect to, and the gradients it returned (None for an unused input)
==================  ==========================================================
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Event(enum.Enum):
    BATCH = "batch"
    PASS_END = "pass-end"
    FORWARD = "forward"
    FORWARD_END = "forward-end"
    MODULE = "module"
    BACKWARD = "backward"
    GRAD = "grad"
    UPDATE_PRE = "update-pre"
    UPDATE_POST = "update-post"
    CLIP = "clip"
    MODE = "mode"
    LOSS = "loss"
    SCHEDULER = "scheduler"
    SCHEDULER_STEP = "scheduler-step"
    PARAM_GROUP = "param-group"
    GROUP_ADDED = "group-added"
    SAVE = "save"
    LOAD_STATE = "load-state"
    PRINT = "print"
    REGISTERED = "registered"
    ATTACHED = "attached"
    INIT = "init"
    PRETRAINED = "pretrained"
    GENERATOR = "generator"
    LOG_SOFTMAX = "log-softmax"
    AUTOGRAD_GRAD = "autograd-grad"
    PACKED = "packed"  # pack_padded_sequence ran: a recurrent layer will skip the padded positions


@dataclass
class Pass:
    """One iteration over a DataLoader (usually: one epoch of it)."""

    index: int
    loader: int
    batches: int = 0  # batches a forward ran on (a batch fetched, then dropped by a `break`, is not due an update)
    updates: int = 0  # updates that applied gradients of this pass's batches
    order: Order | None = None  # the indices its sampler yielded; None: none drawn (an IterableDataset has no sampler)
    ref: Any = None  # a weak reference to the DataLoader
    exhausted: bool = False  # its iterator ran out (False: the script left it before its end, or is still in it)
    reached: bool = False  # a backward pass reached the output of a forward run on one of its batches
    nulls: int = 0  # backward passes in it that were due no update (see ``UpdateLedger.null_backwards``)
    active: bool = False  # a forward on one of its batches ran with gradients and dropout or batch norm in training mode
    nonfinite: Any = None  # a loss computed during it was NaN or infinite (a bool tensor, on the loss's device: read at
    # the end, so that noting it never waits for the device)
    workers: int = 0  # worker processes its iterator started (0: loading in the main process, or persistent workers
    # an earlier pass started)
    start_s: float = 0.0  # seconds from ``iter(loader)`` to its first batch (starting workers included)
    fetched: int = 0  # batches its iterator handed out
    wait_s: float = 0.0  # seconds spent waiting for its later batches, in the iterator's ``__next__``
    span_s: float = 0.0  # seconds from ``iter(loader)`` to its last batch or its end


@dataclass
class Order:
    """The indices a DataLoader's sampler (or batch sampler) yielded during one pass, in order: cheap to keep."""

    head: list[list] = field(default_factory=list)  # the first few index batches, each a list of indices
    batches: int = 0  # index batches drawn (a worker prefetches a few ahead of the batches yielded)
    indices: int = 0
    digest: int = 0  # a hash of every index batch, in order: equal digests, equal orders (within one run)
    drawn: list | None = None  # every index, in order, kept only in a distributed run (ranks' shards are compared)


@dataclass
class Forward:
    """A top-level module call: the model (or a GAN's generator, ...) run on one input.

    Its phase is known only afterwards: see :meth:`checker.session.Session.phase`.
    """

    index: int
    module: int  # the module's serial: its number in this run (``Timeline.serial``), unlike id() never reused
    name: str  # the module's class name
    grad: bool  # grad mode was on
    pass_index: int | None  # the DataLoader pass whose batch was current, if any
    batch: int | None = None  # the leading dimension of its first input tensor
    reached: bool = False  # a backward (or autograd.grad) reached its output
    fed: list[int] = field(default_factory=list)  # later forwards that took its outputs as their inputs
    modes: set[str] = field(default_factory=set)  # "active" / "inactive" dropout or batch-norm computations
    ref: Any = None  # a weak reference to the module
    setup: bool = False  # it ran while a module was being built (in an ``__init__``): a shape probe, a lazy dry run
    probes_input: bool = False  # an input requires grad through a leaf that is no parameter (an adversarial
    # perturbation, a saliency map's input): a backward reaching it reads the input's gradient, it trains nothing itself


@dataclass
class Update:
    """Parameters changed by an optimizer step, or by hand (``p.data.add_(...)``, ``p -= lr * p.grad``)."""

    params: list  # the parameter tensors it updates
    optimizer: Any = None  # None for a manual update
    pass_index: int | None = None

    @property
    def manual(self) -> bool:
        return self.optimizer is None


@dataclass
class LossCall:
    """A call of a loss function (``F.cross_entropy``, ``nn.BCELoss()``, ...)."""

    kind: str  # the function's name
    input: Any
    target: Any
    output: Any
    reduction: str
    forward: int | None  # index of the last top-level forward that started before it
