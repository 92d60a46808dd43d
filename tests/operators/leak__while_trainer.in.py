import torch


class Trainer:
    def __init__(self, model, batches, max_steps):
        self.model, self.batches, self.max_steps = model, batches, max_steps
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.step, self.running = 0, 0.0

    def fit(self):
        while self.step < self.max_steps:
            self.optimizer.zero_grad()
            self.loss = self.model(next(self.batches)).mean()
            self.loss.backward()
            self.optimizer.step()
            self.running += self.loss.item()
            self.step += 1
