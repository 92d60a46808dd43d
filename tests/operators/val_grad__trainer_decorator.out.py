import functools

import torch
from torch import nn


def timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


class Trainer:
    def __init__(self, net: nn.Module, train_data, valid_data):
        self.model = net
        self.train_data, self.valid_data = train_data, valid_data
        self.optimizer = torch.optim.Adam(net.parameters(), 1e-3)

    @torch.no_grad()
    def update_ema(self, ema):
        for e, p in zip(ema.parameters(), self.model.parameters()):
            e.lerp_(p, 0.01)

    # validation: accuracy over the whole held-out set
    @timed
    def validate(self):
        self.model.eval()
        hits = sum((self.model(b["x"]).argmax(-1) == b["y"]).sum().item() for b in self.valid_data)
        self.model.train()
        return hits / len(self.valid_data.dataset)

    def fit(self, epochs, ema):
        for _ in range(epochs):
            for b in self.train_data:
                self.optimizer.zero_grad()
                nn.functional.cross_entropy(self.model(b["x"]), b["y"]).backward()
                self.optimizer.step()
                self.update_ema(ema)
            print(self.validate())
