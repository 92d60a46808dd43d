"""A regression Trainer: dict batches, a Huber loss module, the model's column squeezed in the training step."""
import torch
from torch import nn


class Trainer:
    def __init__(self, model, lr=1e-3, delta=1.0):
        self.model = model
        self.criterion = nn.HuberLoss(delta=delta)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def training_step(self, batch):
        preds = self.model(batch["features"])  # (B, 1) -> (B,)
        return self.criterion(preds, batch["target"])

    def fit(self, loader, epochs):
        for _ in range(epochs):
            for batch in loader:
                self.optimizer.zero_grad()
                loss = self.training_step(batch)
                loss.backward()
                self.optimizer.step()

    @torch.no_grad()
    def predict(self, features):
        self.model.eval()
        return self.model(features).squeeze(1)
