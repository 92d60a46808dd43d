"""A fixed sample of a tensor's elements: up to SAMPLE indices spread evenly over it, the same at every read, so
that two reads of one parameter (before and after a step, or beside another parameter) compare element for
element at the cost of a gather."""
from __future__ import annotations

import functools

SAMPLE = 64  # elements read of each tensor


@functools.lru_cache(maxsize=256)
def spread(n: int, device):
    """Up to SAMPLE indices spread evenly over ``n`` elements."""
    import torch

    return torch.linspace(0, n - 1, min(SAMPLE, n), device=device).round().long().unique()


def indices(tensor):
    return spread(tensor.numel(), tensor.device)


def sample(tensor, index):
    """The elements at ``index`` of the flattened tensor, in float64 and without a graph."""
    import torch

    with torch.no_grad():
        return tensor.detach().reshape(-1)[index].double()
