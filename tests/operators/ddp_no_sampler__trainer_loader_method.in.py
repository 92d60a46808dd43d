import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


class Trainer:
    """Builds its loaders once, from the datasets it is handed."""

    def __init__(self, model, optimizer, train_set, eval_set):
        self.model, self.optimizer = model, optimizer
        self.sampler = DistributedSampler(train_set, seed=42)
        self.train_loader = self.make_loader(train_set, self.sampler)
        self.eval_loader = DataLoader(eval_set, batch_size=256,
                                      sampler=DistributedSampler(eval_set, shuffle=False))

    def make_loader(self, dataset, sampler):
        return DataLoader(dataset, batch_size=32, shuffle=False, sampler=sampler, num_workers=2)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            for inputs, labels in self.train_loader:
                self.optimizer.zero_grad()
                torch.nn.functional.cross_entropy(self.model(inputs), labels).backward()
                self.optimizer.step()
            if dist.get_rank() == 0:
                print(f"epoch {epoch} done")
