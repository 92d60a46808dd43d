import torch
from torch import nn


class Trainer:
    """Holds the pieces; the loss function comes in from outside."""

    def __init__(self, network, loss_function, batches, lr=1e-3):
        self.network = network
        self.loss_function = loss_function
        self.batches = batches
        self.optim = torch.optim.Adam(network.parameters(), lr=lr)

    def compute_loss(self, inputs, labels):
        scores = self.network(inputs)
        return self.loss_function(scores.softmax(dim=1), labels)

    def train(self, epochs):
        for _ in range(epochs):
            for inputs, labels in self.batches:
                self.optim.zero_grad()
                loss = self.compute_loss(inputs, labels)
                loss.backward()
                self.optim.step()

    def validate(self, inputs, labels):
        with torch.inference_mode():
            return self.loss_function(self.network(inputs), labels).item()


weights = torch.tensor([1.0, 2.0, 1.0])
trainer = Trainer(nn.Linear(4, 3), nn.CrossEntropyLoss(weight=weights, ignore_index=-100),
                  [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(10)])
trainer.train(epochs=2)
print(trainer.validate(torch.randn(16, 4), torch.randint(0, 3, (16,))))
