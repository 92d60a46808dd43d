"""A factory returning a TensorDataset, called for each split inside a class's setup."""
import torch
from torch.utils.data import TensorDataset


def build_split(size, seed, noise=0.1):
    g = torch.Generator().manual_seed(seed)
    inputs = torch.rand(size, 3, 8, 8, generator=g)
    labels = (inputs.mean((1, 2, 3)) > 0.5).long()
    return TensorDataset(inputs + noise * torch.randn(inputs.shape, generator=g), labels)


class Experiment:
    def setup(self):
        self.train_ds = build_split(4096, 0)
        self.val_ds = build_split(512, 1, noise=0.0)
        self.test_ds = build_split(512, 2, noise=0.0)
