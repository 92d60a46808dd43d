import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, loader, lr: float = 0.05):
        self.model = model
        self.loader = loader
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def _run_batch(self, inputs, targets):
        loss = self.criterion(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        total = 0.0
        for inputs, targets in self.loader:
            total += self._run_batch(inputs, targets)
        print(f"epoch {epoch}: {total / len(self.loader):.4f}")

    def train(self, max_epochs: int):
        self.model.train()
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


if __name__ == "__main__":
    batches = [(torch.randn(32, 10), torch.randint(0, 3, (32,))) for _ in range(8)]
    Trainer(nn.Linear(10, 3), batches).train(max_epochs=5)
