import random

import torch
from torch.utils.data import DataLoader, Sampler


class SortishSampler(Sampler):
    """Sorts by length within random chunks of 50 batches (fastai's idea)."""

    def __init__(self, lengths, bs):
        self.lengths, self.bs = lengths, bs

    def __iter__(self):
        idx = random.sample(range(len(self.lengths)), len(self.lengths))
        chunks = [idx[i:i + 50 * self.bs] for i in range(0, len(idx), 50 * self.bs)]
        return iter([i for c in chunks for i in sorted(c, key=lambda j: -self.lengths[j])])

    def __len__(self):
        return len(self.lengths)


class Trainer:
    def __init__(self, model, dataset, bs=16):
        self.model = model
        self.loader = DataLoader(dataset, batch_size=bs, shuffle=True,
                                 collate_fn=dataset.collate)
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self, epochs):
        for _ in range(epochs):
            for batch in self.loader:
                self.opt.zero_grad()
                self.model(**batch).loss.backward()
                self.opt.step()
