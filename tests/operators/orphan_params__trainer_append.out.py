"""A Trainer that owns its model, optimizer and data; the model grows its hidden layers with append()."""
import torch
from torch import nn


class Tower(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.embed = nn.Linear(features, hidden)
        self.hidden = []
        for _ in range(layers):
            self.hidden.append(nn.Linear(hidden, hidden))
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = torch.relu(self.embed(x))
        for i in range(len(self.hidden)):
            x = x + torch.relu(self.hidden[i](x))
        return self.out(x)


class Trainer:
    def __init__(self, model, data, lr=3e-3):
        self.model, self.data = model, data
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()

    def train_step(self, inputs, labels):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(inputs), labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, epochs):
        for epoch in range(epochs):
            losses = [self.train_step(x, y) for x, y in self.data]
            print(f"epoch {epoch}: {sum(losses) / len(losses):.3f}")


if __name__ == "__main__":
    Trainer(Tower(12, 48, 3, 5), [(torch.randn(32, 12), torch.randint(0, 5, (32,)))] * 10).fit(3)
