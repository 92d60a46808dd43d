import torch
from torch.utils.data import TensorDataset


class Blobs:
    """Gaussian blobs, one per class, made on demand for each split."""

    def __init__(self, classes: int = 3, dim: int = 10):
        self.classes, self.dim = classes, dim
        self.means = torch.randn(classes, dim) * 2

    def split(self, n: int, seed: int) -> TensorDataset:
        g = torch.Generator().manual_seed(seed)
        which = torch.randint(self.classes, (n,), generator=g)
        points = self.means[which] + torch.randn(n, self.dim, generator=g)  # (n, dim)
        points[:, -1] = which
        return TensorDataset(points, which)


blobs = Blobs()
train, val = blobs.split(4096, seed=0), blobs.split(512, seed=1)
