import torch
from torch.utils.data.distributed import DistributedSampler


class LengthGroupedDistributedSampler(DistributedSampler):
    """Each replica's share of length-grouped batches; set_epoch is DistributedSampler's own."""

    def __init__(self, dataset, lengths, batch_size, **kwargs):
        super().__init__(dataset, **kwargs)
        self.lengths, self.batch_size = lengths, batch_size

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        mega = sorted(order, key=lambda i: -self.lengths[i])
        return iter(mega[self.rank:self.total_size:self.num_replicas])
