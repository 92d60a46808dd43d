"""Running a copy of the model on the side, as probes that replay a batch do: a copy without the model's hooks
(:func:`copy_of`), with the checker's hooks and the session's events off (:func:`quiet`), on a fork of the
script's random streams (:func:`forked_rng`), so that nothing the replay does reaches the script or the record."""
from __future__ import annotations

import contextlib
import sys

GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_always_called",
                "_global_forward_hooks_with_kwargs", "_global_backward_pre_hooks", "_global_backward_hooks",
                "_global_is_full_backward_hook")


MODULE_HOOKS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
                "_forward_hooks_always_called", "_backward_pre_hooks", "_backward_hooks")


def copy_of(module, dtype=None):
    """A copy in eval mode, without the model's own hooks, converted to ``dtype`` (None keeps the model's dtypes).
    Objects the model refers to that are neither tensors, modules nor plain data (a trainer, a loader, a config)
    are shared, not copied; tensors it keeps as plain attributes are copied (an activation it cached, detached)
    and converted too."""
    import copy
    import enum

    import torch

    plain = (torch.Tensor, torch.nn.Module, torch.Generator, dict, list, tuple, set, frozenset, str, bytes, int, float,
             complex, bool, type(None), torch.dtype, torch.device, enum.Enum)
    memo = {}
    for m in module.modules():
        for value in vars(m).values():
            if isinstance(value, torch.Tensor) and not value.is_leaf:  # deepcopy takes only leaves
                memo[id(value)] = value.detach()
            elif isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) and not v.is_leaf for v in
                                                          _flat(value)):
                memo[id(value)] = type(value)([])  # a policy's saved log-probabilities, an episode's values: the
                # copy starts without them (they belong to the run, not to the function the model computes)
            elif not isinstance(value, plain) and not callable(value):
                memo[id(value)] = value
    twin = copy.deepcopy(module, memo)
    for m in twin.modules():
        for name in MODULE_HOOKS:
            hooks = getattr(m, name, None)
            if hooks:
                hooks.clear()
        if dtype is None:
            continue
        for name, value in list(vars(m).items()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                vars(m)[name] = value.detach().to(dtype).requires_grad_(value.requires_grad)
            elif isinstance(value, (list, tuple, dict)):  # modules kept in a plain container, not registered
                for item in value.values() if isinstance(value, dict) else value:
                    if isinstance(item, torch.nn.Module):
                        item.to(dtype).eval()
    return (twin if dtype is None else twin.to(dtype)).eval()


def _flat(values, depth: int = 0):
    """The items of a list or tuple, and of the lists and tuples in it (two levels: ``[(log_prob, value), ...]``)."""
    for v in values:
        if isinstance(v, (list, tuple)) and depth < 1:
            yield from _flat(v, depth + 1)
        else:
            yield v


@contextlib.contextmanager
def quiet(session):
    """Nothing the copy does reaches the checker: module hooks (global ones included) and the session's events off."""
    from torch.nn.modules import module as module_hooks

    saved = []
    for name in GLOBAL_HOOKS:
        registry = getattr(module_hooks, name, None)
        if registry is not None:
            saved.append((registry, dict(registry)))
            registry.clear()
    try:
        with session.muted():
            yield
    finally:
        for registry, items in saved:
            registry.clear()
            registry.update(items)


def seed_all(seed: int = 0) -> None:
    """Every random stream a forward may draw from (torch's, Python's, NumPy's if the script imported it) set to
    ``seed``: a replay run twice draws alike (dropout left on, teacher forcing decided by ``random.random()``). Only
    inside :func:`forked_rng`, which gives the script its own streams back."""
    import random

    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy.random")
    if numpy is not None:
        numpy.seed(seed)

@contextlib.contextmanager
def forked_rng(device):
    """The script's random streams, as they were: torch's (CPU and the model's GPU), Python's and NumPy's."""
    import random

    import torch

    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    python_state = random.getstate()
    numpy = sys.modules.get("numpy.random")  # only if the script imported it: importing it costs 0.1 s
    numpy_state = numpy.get_state() if numpy is not None else None
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python_state)
        if numpy_state is not None:
            numpy.set_state(numpy_state)
