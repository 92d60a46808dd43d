import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, config):
        self.rank = dist.get_rank()
        self.model = DDP(model.to(self.rank), device_ids=[self.rank])
        self.train_sampler = DistributedSampler(train_data, num_replicas=dist.get_world_size(), rank=self.rank)
        self.train_loader = DataLoader(train_data, batch_size=config.batch_size, sampler=self.train_sampler,
                                       pin_memory=True)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        for source, targets in self.train_loader:
            self._run_batch(source.to(self.rank), targets.to(self.rank))

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
