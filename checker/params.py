"""Parameters: one gradient hook each, and updates made without ``torch.optim``.

Every parameter that runs with ``requires_grad`` (or that an optimizer holds)
gets one hook that reports each gradient contribution before it is added to
``.grad``. A parameter no optimizer holds but that receives gradient may be
trained by hand (``p.data.add_(p.grad, alpha=-lr)``, ``p -= lr * p.grad`` under
``no_grad``): a fingerprint of its values (its norm, and its sum accumulated in
float64), taken when its first gradient arrives and compared at every backward
pass, shows when such an update happened. The norm alone misses an update too
small to move a float32 norm (a well-fit batch's gradient of 1e-9 times the
learning rate); the float64 sum of float32 values is exact and sees it.
``.data`` edits bypass autograd's version counters, so values are compared, not versions.
"""
from __future__ import annotations

import math
import weakref
from typing import Callable

import torch

from checker import tensors as tensors_


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
        if t.dtype in (torch.float32, torch.float64) and tensors_.plain(t):
            groups.setdefault((t.device, t.dtype), []).append(t)
        else:  # complex, half precision, sparse, nested ...: each by its own values; meta and wrappers not at all
            found = tensors_.norm(t, norm_type)
            if found is not None:
                others.append(found.float().to(device))
    norms = [n.float().to(device) for group in groups.values() for n in torch._foreach_norm(group, norm_type)]
    if not norms and not others:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack(norms + others), norm_type))


class ParamWatch:
    """Keyed by ``id()``, checked against a weak reference: a parameter freed with its model (a second experiment,
    a fold of a cross-validation) may leave its id to a new one, which is then watched afresh."""

    def __init__(self) -> None:
        self._managed: set[int] = set()  # held by an optimizer
        self._fingerprints: dict[int, Fingerprint] = {}  # not held, received gradient: id -> values last seen
        self._refs: dict[int, weakref.ref] = {}  # hooked parameters
        self._by_hand: set[int] = set()
        self._versions: dict[int, int | None] = {}  # not held: id -> its version counter when last seen
        self._nonfinite = False  # a parameter trained by hand changed to NaN or infinite values

    def hooked_any(self) -> bool:
        return bool(self._refs)

    def holds(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is a hooked parameter (an optimizer holds it, or a module ran with it)."""
        ref = self._refs.get(id(t))
        return ref is not None and ref() is t

    def _known(self, param: torch.Tensor) -> bool:
        """Whether ``param`` itself is hooked; forgets a freed parameter that had its id."""
        ref = self._refs.get(id(param))
        if ref is None:
            return False
        if ref() is param:
            return True
        pid = id(param)
        del self._refs[pid]
        self._managed.discard(pid)
        self._fingerprints.pop(pid, None)
        self._versions.pop(pid, None)
        self._by_hand.discard(pid)
        return False

    def watch(self, param: torch.Tensor, on_grad: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        """Report ``param``'s gradient contributions to ``on_grad(param, grad)``, once per parameter. A lazy module's
        parameter not yet materialised (its own pre-hook runs after the session's) is watched at a later call."""
        if not param.requires_grad or torch.nn.parameter.is_lazy(param) or self._known(param):
            return
        ref = weakref.ref(param)
        self._refs[id(param)] = ref

        def on_gradient(grad: torch.Tensor) -> None:
            p = ref()
            if p is None:
                return
            if id(p) not in self._managed and id(p) not in self._fingerprints:
                self._fingerprints[id(p)] = fingerprint(p)
                self._versions[id(p)] = version_of(p)
            on_grad(p, grad)

        param.register_hook(on_gradient)

    def manage(self, param: torch.Tensor, on_grad: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
        """``param`` belongs to an optimizer: its updates are the optimizer's steps."""
        self._known(param)  # a freed parameter's id is forgotten first
        self._managed.add(id(param))
        self._fingerprints.pop(id(param), None)
        self.watch(param, on_grad)

    def changed_by_hand(self) -> list[torch.Tensor]:
        """Parameters no optimizer holds whose values changed since the last call."""
        if not self._fingerprints:
            return []
        alive = [(pid, p) for pid in list(self._fingerprints) if (p := self._refs[pid]()) is not None]
        norms = fingerprints([p for _, p in alive])
        changed = []
        for (pid, p), norm in zip(alive, norms):
            version, seen = version_of(p), self._versions.get(pid)
            self._versions[pid] = version
            # An update whose step is below the weights' resolution (a run converged to rounding) changes no value;
            # once a parameter is known to be trained by hand, its being written in place counts all the same.
            written = pid in self._by_hand and version is not None and seen is not None and version != seen
            if not same(norm, self._fingerprints[pid]) or written:
                self._fingerprints[pid] = norm
                self._by_hand.add(pid)
                self._nonfinite = self._nonfinite or not math.isfinite(norm[0])
                changed.append(p)
        return changed

    def hand_weights_finite(self) -> bool:
        """Whether the parameters trained by hand held finite values when last seen changing (an update of weights
        that are already NaN leaves them NaN: it cannot be seen)."""
        return not self._nonfinite

    def updated_by_hand(self) -> list[torch.Tensor]:
        return [p for pid in self._by_hand if (p := self._refs[pid]()) is not None]


def version_of(t: torch.Tensor) -> int | None:
    """A tensor's version counter (each in-place write moves it; a write through ``.data`` does not); None for a
    kind that keeps none (an inference tensor)."""
    try:
        return t._version
    except (RuntimeError, AttributeError):
        return None


Fingerprint = tuple[float, float]  # (norm, sum in float64)


def fingerprint(param: torch.Tensor) -> Fingerprint:
    return fingerprints([param])[0]


def fingerprints(params: list[torch.Tensor]) -> list[Fingerprint]:
    """Each tensor's norm (one fused call for the plain floating-point ones) and, for those, the sum of its values
    in float64; NaN where the values cannot be read (a meta tensor), so that it never looks changed."""
    if not params:
        return []
    with torch.no_grad():
        fused = [i for i, p in enumerate(params) if p.dtype in (torch.float32, torch.float64) and tensors_.plain(p)]
        found = [(math.nan, math.nan)] * len(params)
        if fused:
            plain = [params[i].detach() for i in fused]
            norms = torch._foreach_norm(plain)
            sums = torch.stack([t.sum(dtype=torch.float64).to(norms[0].device) for t in plain])
            for i, n, total in zip(fused, torch.stack(norms).tolist(), sums.tolist()):
                found[i] = (n, total)
        for i in set(range(len(params))).difference(fused):
            n = tensors_.norm(params[i])
            found[i] = (float(n) if n is not None else math.nan, math.nan)
    return found


def same(a: Fingerprint, b: Fingerprint) -> bool:
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))
