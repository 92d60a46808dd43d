import os

import torch


class Runner:
    def __init__(self, net, every):
        self.device_index = int(os.environ["LOCAL_RANK"])
        self.net, self.every = net, every

    def _snapshot(self, epoch):
        torch.save({"epoch": epoch, "state": self.net.module.state_dict()}, "snapshot.pt")

    def fit(self, epochs):
        for epoch in range(epochs):
            self._one_epoch(epoch)
            if self.device_index == 0 and epoch % self.every == 0:
                self._snapshot(epoch)
