"""The update ledger of an observed run: backward passes, the losses they took, optimizer and manual updates,
and which forwards and DataLoader passes each update applied."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from checker import tensors
from checker.bus import safe
from checker.events import Event, Update
from checker.params import ParamWatch, total_norm
from checker.timeline import Timeline

LEAF_WALK = 256  # autograd nodes read from a loss to find the plain tensors it trains (see before_backward)


@dataclass(kw_only=True)
class UpdateLedger(Timeline):
    updates: int = 0
    manual_updates: int = 0
    scaler_skips: int = 0
    backwards: int = 0
    backwards_before_first_update: int | None = None
    losses: list[float | None] = field(default_factory=list)
    loss_forwards: list[int] = field(default_factory=list)  # per loss: the top-level forwards begun before its backward
    loss_groups: list[int] = field(default_factory=list)  # per loss: which updater applied it (-1: none yet)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    params: ParamWatch = field(default_factory=ParamWatch)
    reevaluations: int = 0  # backward passes of a closure step after its first (one update's re-evaluations)
    null_backwards: int = 0  # backward passes that gave parameters trained by hand only negligible gradients (below
    # their values' float resolution), or came after those went NaN, and no update was seen after them: nothing was
    # due, or nothing could be seen (an update that changes no value, or leaves NaN weights NaN, looks like none)
    _step: Update | None = None
    _unsettled: int = 0  # the first forward not yet credited to an update
    _backwards_since_update: int = 0
    _last_updater: int | None = None
    _alternations: int = 0  # updates by another optimizer than the last, with a backward in between
    _joint_steps: int = 0  # updates by another optimizer than the last, with no backward in between
    _gaps: dict[int, int] = field(default_factory=dict)  # backward passes between two updates -> how often
    _samples: int = 0  # sample() calls of torch.distributions (actions drawn, as a policy acts)
    _samples_by_last_update: int = 0  # ... made before the last update (acting between updates, not after training)
    _score_terms: int = 0  # log_prob calls with gradients of a value that has none (a sampled action's)
    _hand_models: set[int] = field(default_factory=set)  # top-level modules that had parameters updated by hand
    _hand_trained: set[int] = field(default_factory=set)  # ids of their parameters
    _owners: dict[int, int] = field(default_factory=dict)  # parameter id -> id of the optimizer holding it
    _touched: set[int] = field(default_factory=set)  # optimizers whose parameters the current backward reached
    _coupled: bool = False  # one backward pass reached the parameters of two optimizers
    _unapplied: list[int] = field(default_factory=list)  # losses since the last update
    _updaters: dict[int | None, int] = field(default_factory=dict)  # optimizer id (None: by hand) that updated -> ordinal
    _scaled: dict[int, float] = field(default_factory=dict)  # id of a GradScaler-scaled loss -> its scale
    _last_update_pass: int | None = None  # the DataLoader pass the latest update happened in
    _closure_calls: int = -1  # calls of the running step's closure (-1: no closure step running)
    _hand_grads: Any = None  # this backward's gradients to parameters no optimizer holds: above their values' float
    # resolution anywhere? (a bool tensor on their device, read only when no update followed; None: none arrived)
    _held_grads: bool = False  # this backward gave gradient to a parameter an optimizer holds
    _backward_pass: int | None = None  # the DataLoader pass this backward ran in

    autograd_grads: int = 0  # torch.autograd.grad calls running now: the gradients their hooks see go to no .grad
    _pre_norms: dict | None = None  # while UPDATE_PRE is being handled: gradient norms already computed, by parameters

    total_norm = staticmethod(total_norm)

    def _update_pre(self, update: Update) -> None:
        """Tell the observers an update is due; while they look, each gradient norm is computed once."""
        self._pre_norms = {}
        try:
            self.emit(Event.UPDATE_PRE, update)
        finally:
            self._pre_norms = None

    def grad_norm(self, params: list, norm_type: float = 2.0) -> float:
        """The total norm of ``params``' gradients (as ``clip_grad_norm_`` computes it); computed once per update
        for the observers of UPDATE_PRE, where several ask for the same (a clip over the parameters the optimizer
        steps)."""
        cache = self._pre_norms
        key = (tuple(map(id, params)), norm_type)
        if cache is not None and key in cache:
            return cache[key]
        norm = total_norm([p.grad for p in params if p.grad is not None], norm_type)
        if cache is not None:
            cache[key] = norm
        return norm

    def steps(self) -> int:
        return self.updates

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
        self._settle_null_backward()
        if not self.params.hooked_any():  # no module ran with parameters, no optimizer holds any: plain tensors
            # trained by hand (``w = torch.randn(3, requires_grad=True)``, then ``w -= lr * w.grad``)
            for leaf in tensors.grad_leaves(loss, LEAF_WALK) or []:
                self.params.watch(leaf, self._on_grad)
        self.backwards += 1
        self._backward_pass = self.current.index if self.current is not None else None
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

    def is_parameter(self, t: torch.Tensor) -> bool:
        return isinstance(t, torch.nn.Parameter) or self.params.holds(t)

    def running(self, module: torch.nn.Module) -> None:
        """Watch the parameters a module runs with; a tensor computed from others that ``functional_call`` put in a
        parameter's place (a fast weight of an inner loop) is not a parameter: its gradient flows on to the leaf it
        was made from."""
        for p in module._parameters.values():
            if p is not None and p.requires_grad and p.grad_fn is None:
                self.params.watch(p, self._on_grad)

    def _on_grad(self, p: torch.Tensor, grad: torch.Tensor) -> None:
        owner = self._owners.get(id(p))
        if owner is not None:
            self._touched.add(owner)
            self._held_grads = True
        elif not self._held_grads:
            visible = visible_step(p, grad)
            self._hand_grads = visible if self._hand_grads is None else self._hand_grads | visible
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
        self.stop_if_due("step")
        self._check_manual_update()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self._step = Update(params, optimizer, self.current.index if self.current is not None else None)
        kwargs = kwargs or {}
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)  # args[0] is the optimizer
        if not callable(closure):
            self._update_pre(self._step)
            return None
        self._closure_calls = 0
        step = self._step

        def observed_closure(*a: Any, **k: Any) -> Any:
            if self._step is step:
                self._closure_calls += 1
            result = closure(*a, **k)
            if self._step is step and self._closure_calls == 1:
                self._update_pre(step)
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
            self._update_pre(step)
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
        self._update_pre(update)
        self.manual_updates += 1
        self._count_update(None)
        self.emit(Event.UPDATE_POST, update)

    def _credit(self) -> None:
        """An update applied the gradients of the training forwards since the last one: credit their passes."""
        recent = self.forwards[self._unsettled:]
        passes = {f.pass_index for f in recent if f.reached and not f.probes_input and f.pass_index is not None}
        for index in passes | ({self.current.index} if self.current is not None else set()):
            self.passes[index].updates += 1
        pending = [f.index for f in recent[-1:] if f.grad and not f.reached]  # a manual update is seen at the next backward
        self._unsettled = pending[0] if pending else len(self.forwards)

    def _count_update(self, updater: int | None) -> None:
        if self.clock is not None:
            self.clock.update_end()
        self._last_update_pass = self.current.index if self.current is not None else None
        if self.current is not None:
            self._train_loaders.add(self.current.loader)
        if self.updates == 0:
            self.backwards_before_first_update = self.backwards
        if updater != self._last_updater and self._last_updater is not None:
            if self._backwards_since_update:
                self._alternations += 1
            else:  # two optimizers applying one backward pass: one model's parts (an encoder and a decoder)
                self._joint_steps += 1
        self._last_updater = updater
        group = self._updaters.setdefault(updater, len(self._updaters))
        for index in self._unapplied:
            self.loss_groups[index] = group
        self._unapplied.clear()
        if self._backwards_since_update:
            self._gaps[self._backwards_since_update] = self._gaps.get(self._backwards_since_update, 0) + 1
        self.updates += 1
        self._backwards_since_update = 0
        self._samples_by_last_update = self._samples
        self._credit()

    def _settle_backward(self) -> None:
        """The previous backward pass is over: did it reach the parameters of two optimizers?"""
        self._coupled = self._coupled or len(self._touched) >= 2
        self._touched.clear()

    def _settle_null_backward(self) -> None:
        """The previous backward pass, with no update after it: were its gradients for parameters trained by hand
        all negligible?"""
        hand, self._hand_grads = self._hand_grads, None
        held, self._held_grads = self._held_grads, False
        if self._backwards_since_update and not held and hand is not None and \
                (not self.params.hand_weights_finite() or not bool(hand)):
            self.null_backwards += 1
            if self._backward_pass is not None:
                self.passes[self._backward_pass].nulls += 1

    def finish(self) -> None:
        """The script ended: account for a manual update made after the last backward."""
        self._settle_backward()
        self._check_manual_update()
        self._settle_null_backward()

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

    def usual_gap(self) -> int | None:
        """The number of backward passes most updates followed (the smaller on a tie); None before any update."""
        return max(self._gaps, key=lambda gap: (self._gaps[gap], -gap)) if self._gaps else None

    def sampled(self) -> None:
        self._samples += 1

    def scored(self) -> None:
        self._score_terms += 1

    def policy_gradient(self) -> bool:
        """Whether the loss is a policy gradient's: log-probabilities of sampled values taken with gradients, and
        values sampled between the updates, at least one for every two (a policy acting; a density model sampled once
        after training, or once an epoch, is not)."""
        return self._score_terms > 0 and self.updates > 0 and 2 * self._samples_by_last_update >= self.updates

    def _fed_across_optimizers(self) -> bool:
        """Whether a model's output, with no gradient to carry back, was the input of a model another optimizer trains
        (a generator's batch handed to the discriminator while the generator is frozen or detached)."""
        def owner(forward) -> int | None:
            module = forward.ref() if forward.ref is not None else None
            if not isinstance(module, torch.nn.Module):
                return None
            return next((self._owners[id(p)] for p in module.parameters() if id(p) in self._owners), None)

        for producer in self.forwards:
            if not producer.fed:
                continue
            mine = owner(producer)
            if mine is not None and any(owner(self.forwards[i]) not in (None, mine) for i in producer.fed[:4]):
                return True
        return False

    def _disjoint_optimizers(self) -> bool:
        used = [opt for opt in self.optimizers if id(opt) in self._updaters]
        seen: set[int] = set()
        for opt in used:
            ids = {id(p) for group in opt.param_groups for p in group["params"]}
            if ids & seen:
                return False
            seen |= ids
        return len(used) >= 2


def visible_step(p: torch.Tensor, grad: torch.Tensor) -> Any:
    """Whether a step of ``grad`` (at a learning rate up to 1) would change a value of ``p``: a gradient above the float
    resolution of the value it moves, or not finite, anywhere (a bool tensor, not read here: reading it would wait for
    the device)."""
    if not (tensors.plain(grad) and tensors.plain(p) and grad.is_floating_point() and grad.shape == p.shape
            and grad.layout == torch.strided):
        return True
    eps = torch.finfo(p.dtype).eps
    with torch.no_grad():
        weights = p.detach()
        if grad.device.type == "cpu":  # most steps are settled by the extremes (reading them costs no device wait)
            largest = float(grad.abs().amax()) if grad.numel() else 0.0
            if not largest <= eps * float(weights.abs().amax()):  # above the largest weight's resolution, or NaN
                return True
            if largest == 0.0:
                return False
        return ~(grad.abs() <= weights.abs() * eps).all()  # NaN is visible too
