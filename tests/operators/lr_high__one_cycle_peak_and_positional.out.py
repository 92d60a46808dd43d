import torch
from torch import nn


class Trainer:
    def __init__(self, model, loader, epochs=10):
        self.model, self.loader, self.epochs = model, loader, epochs
        self.optimizer = self.configure(0.1)
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, 5.0, epochs=epochs,
                                                             steps_per_epoch=len(loader))

    def configure(self, lr):
        return torch.optim.SGD(self.model.parameters(), lr, momentum=0.9, nesterov=True)
