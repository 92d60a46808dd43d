import torch


class Trainer:
    def __init__(self, net, data):
        self.net, self.data = net, data
        self.optimizer = torch.optim.Adam(net.parameters(), 1e-3)

    def epoch(self):
        for batch in self.data:
            self.optimizer.zero_grad()  # fresh gradients for this batch
            self.net(batch).mean().backward()
            self.optimizer.step()
