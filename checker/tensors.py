"""Reading the script's tensors without ever changing what the script does.

A training script may hand a module, a loss or an optimizer any kind of tensor:
sparse (COO, CSR, ...), nested, quantized, meta, complex, a ``torch.func``
wrapper inside a transform, a ``__torch_function__`` or wrapper subclass. The
checker's hooks read them through these functions, which never raise on an
unusual kind: what cannot be read says so (``None``, ``False``) and the probe
that asked treats it as not observed. Only a plain tensor (strided, with real
storage, not meta, no wrapper around it) is read value by value.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch

_functorch = torch._C._functorch


def in_transform() -> bool:
    """Whether a ``torch.func`` transform (grad, vmap, jacrev, ...) is running: its tensors are wrappers whose
    values and graphs are the transform's, not the script's training."""
    return _functorch.peek_interpreter_stack() is not None


def plain(t: torch.Tensor) -> bool:
    """A strided tensor with storage of its own: not sparse, nested, meta, quantized or a wrapper."""
    if t.layout != torch.strided or t.is_nested or t.is_meta or t.is_quantized:
        return False
    if _functorch.is_functorch_wrapped_tensor(t):
        return False
    return type(t) is torch.Tensor or type(t) is torch.nn.Parameter or storage_key(t) is not None


def storage_key(t: torch.Tensor) -> int | None:
    """The address of the tensor's storage (equal for views of one storage), or None where it has none."""
    try:
        pointer = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, wrapper subclasses, functorch
        return None
    return pointer or None


def leading(t: torch.Tensor) -> int | None:
    """The size of the first dimension (a batch's size), or None for a scalar or a tensor without one size."""
    try:
        return int(t.shape[0]) if t.dim() else None
    except (RuntimeError, TypeError, ValueError):  # a nested tensor's ragged sizes
        return None


def values(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor's stored values as a dense tensor (a sparse tensor's non-zeros, a nested tensor's elements),
    detached; None where they cannot be read (meta, wrappers)."""
    t = t.detach()
    if t.is_meta or _functorch.is_functorch_wrapped_tensor(t):
        return None
    try:
        if t.layout == torch.sparse_coo:
            return t.coalesce().values()
        if t.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
            return t.values()
        if t.is_nested:
            return torch.cat([part.reshape(-1) for part in t.unbind()]) if t.size(0) else t.new_zeros(0)
        if t.is_quantized:
            return t.dequantize()
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    return t if plain(t) else None


def norm(t: torch.Tensor, norm_type: float = 2.0) -> torch.Tensor | None:
    """The vector norm of the tensor's values in float32 or float64 (complex values by their modulus), on its
    device; None where the values cannot be read."""
    found = values(t)
    if found is None:
        return None
    if not (found.is_floating_point() or found.is_complex()):
        found = found.float()
    elif found.dtype not in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        found = found.to(torch.complex64 if found.is_complex() else torch.float32)
    return torch.linalg.vector_norm(found, norm_type)


def any_nonzero(t: torch.Tensor) -> bool | None:
    """Whether some value is not zero (one host sync); None where the values cannot be read."""
    found = values(t)
    if found is None:
        return None
    return bool(found.ne(0).any()) if found.numel() else False


MAX_OUTPUT_TENSORS = 8
_is_compiling = torch.compiler.is_compiling
_graph_task_id = torch._C._current_graph_task_id
_transforming = torch._C._functorch.peek_interpreter_stack


def observable() -> bool:
    """Module calls worth observing: not traced by torch.compile, not recomputed inside a backward pass
    (activation checkpointing runs forwards again while autograd's engine works), not inside a ``torch.func``
    transform (its tensors are the transform's wrappers)."""
    return not _is_compiling() and _graph_task_id() == -1 and _transforming() is None


def tensors_in(value: Any, limit: int = MAX_OUTPUT_TENSORS) -> list[torch.Tensor]:
    """The first few tensors in a (nested) tuple, list, dict, dataclass or namespace (a model's output object).

    Iterative on purpose: a recursive closure would be a reference cycle holding the tensors, and so
    their autograd graphs, until the garbage collector ran.
    """
    found: list[torch.Tensor] = []
    stack, seen = [value], 0
    while stack and len(found) < limit and seen < 4 * MAX_OUTPUT_TENSORS:
        item = stack.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(reversed([getattr(item, f.name, None) for f in dataclasses.fields(item)]))
        elif isinstance(item, types.SimpleNamespace):
            stack.extend(reversed(list(vars(item).values())))
    return found


def grad_leaves(t: torch.Tensor, limit: int = 64, whole: bool = True) -> list[torch.Tensor] | None:
    """The leaf tensors a gradient of ``t`` would reach (those that require grad), read from its autograd graph
    without running it. When the graph has more than ``limit`` nodes (a model's whole forward): None, or with
    ``whole=False`` the leaves of the first ``limit``. None when the graph cannot be read."""
    if not t.requires_grad:
        return []
    if t.grad_fn is None:
        return [t]
    leaves, stack, seen = [], [t.grad_fn], set()
    try:
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            if len(seen) >= limit:
                return None if whole else leaves
            seen.add(id(node))
            variable = getattr(node, "variable", None)  # an AccumulateGrad node: the leaf it writes .grad to
            if isinstance(variable, torch.Tensor):
                leaves.append(variable)
            stack.extend(fn for fn, _ in node.next_functions)
    except (RuntimeError, AttributeError):
        return None
    return leaves


def find_labels(batch: Any) -> torch.Tensor | None:
    """The batch's class labels: its last one-dimensional integral tensor (``(x, y)`` → ``y``)."""
    if isinstance(batch, dict):
        candidates = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        candidates = list(batch)
    else:
        return None
    for item in reversed(candidates):
        if isinstance(item, torch.Tensor) and plain(item) and item.dim() >= 1 and item.numel() == item.shape[0] \
                and len(candidates) > 1 and not item.is_complex():
            if not item.dtype.is_floating_point or bool(torch.all(item == item.round())):
                return item.reshape(-1)
    return None
