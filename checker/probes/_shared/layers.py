"""Which module of a model is its first layer: the first that has parameters of its own or normalises its input
(input-scale measures what it receives, label-leak reads it)."""
from __future__ import annotations

NORM_LAYERS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
               "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
               "LocalResponseNorm", "RMSNorm")


def first_layer(model):
    """The first module of a compiled model that has parameters or normalises (hooks inside compiled code do not
    run: its input is taken as the model's own, in registration order)."""
    from torch import nn

    return next((m for m in model.modules() if type(m).__name__ in NORM_LAYERS
                 or any(isinstance(p, nn.Parameter) for p in m._parameters.values())), None)
