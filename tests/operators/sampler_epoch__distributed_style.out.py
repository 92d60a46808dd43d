import math

import torch
from torch.utils.data import Sampler


class ShardedShuffleSampler(Sampler):
    """Each replica's shard of a shuffled order, padded to equal length."""

    def __init__(self, dataset, num_replicas, rank, seed=0):
        self.dataset, self.num_replicas, self.rank, self.seed = dataset, num_replicas, rank, seed
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / num_replicas)

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed)
        indices = torch.randperm(len(self.dataset), generator=g).tolist()
        indices += indices[: self.num_samples * self.num_replicas - len(indices)]
        return iter(indices[self.rank::self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch
