"""Parameters: one gradient hook each, and updates made without ``torch.optim``.

Every parameter that runs with ``requires_grad`` (or that an optimizer holds)
gets one hook that reports each gradient contribution before it is added to
``.grad``. A parameter no optimizer holds but that receives gradient may be
trained by hand (``p.data.add_(p.grad, alpha=-lr)``, ``p -= lr * p.grad`` under
``no_grad``): a fingerprint of its values (its norm), taken when its first
gradient arrives and compared at every backward pass, shows when such an update
happened. ``.data`` edits bypass autograd's version counters, so values are compared, not versions.
"""
from __future__ import annotations

import math
import weakref
from typing import Callable

import torch


def total_norm(tensors: list[torch.Tensor], norm_type: float = 2.0) -> float:
    """The norm of the tensors' norms (as ``clip_grad_norm_`` computes it): one fused call per device for float32
    and float64 tensors, as ``clip_grad_norm_`` does, and each other tensor in float32."""
    if not tensors:
        return 0.0
    device = tensors[0].device
    groups: dict[tuple, list[torch.Tensor]] = {}
    others = []
    for t in tensors:
        t = t.detach()
        if t.dtype in (torch.float32, torch.float64) and t.layout == torch.strided:
            groups.setdefault((t.device, t.dtype), []).append(t)
        else:
            others.append(torch.linalg.vector_norm(t.float(), norm_type).to(device))
    norms = [n.float().to(device) for group in groups.values() for n in torch._foreach_norm(group, norm_type)]
    return float(torch.linalg.vector_norm(torch.stack(norms + others), norm_type))


class ParamWatch:
    def __init__(self) -> None:
        self._hooked: set[int] = set()
        self._managed: set[int] = set()  # held by an optimizer
        self._fingerprints: dict[int, float] = {}  # not held, received gradient: id -> norm last seen
        self._refs: dict[int, weakref.ref] = {}
        self._by_hand: set[int] = set()

    def watch(self, param: torch.Tensor, on_grad: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        """Report ``param``'s gradient contributions to ``on_grad(param, grad)``, once per parameter."""
        if id(param) in self._hooked or not param.requires_grad:
            return
        self._hooked.add(id(param))
        ref = weakref.ref(param)
        self._refs[id(param)] = ref

        def on_gradient(grad: torch.Tensor) -> None:
            p = ref()
            if p is None:
                return
            if id(p) not in self._managed and id(p) not in self._fingerprints:
                self._fingerprints[id(p)] = fingerprint(p)
            on_grad(p, grad)

        param.register_hook(on_gradient)

    def manage(self, param: torch.Tensor, on_grad: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        """``param`` belongs to an optimizer: its updates are the optimizer's steps."""
        self._managed.add(id(param))
        self._fingerprints.pop(id(param), None)
        self.watch(param, on_grad)

    def changed_by_hand(self) -> list[torch.Tensor]:
        """Parameters no optimizer holds whose values changed since the last call."""
        if not self._fingerprints:
            return []
        alive = [(pid, p) for pid in list(self._fingerprints) if (p := self._refs[pid]()) is not None]
        with torch.no_grad():
            norms = [float(n) for n in torch._foreach_norm([p.detach() for _, p in alive])] if alive else []
        changed = []
        for (pid, p), norm in zip(alive, norms):
            if not same(norm, self._fingerprints[pid]):
                self._fingerprints[pid] = norm
                self._by_hand.add(pid)
                changed.append(p)
        return changed

    def updated_by_hand(self) -> list[torch.Tensor]:
        return [p for pid in self._by_hand if (p := self._refs[pid]()) is not None]


def fingerprint(param: torch.Tensor) -> float:
    with torch.no_grad():
        return float(torch._foreach_norm([param.detach()])[0])


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))
