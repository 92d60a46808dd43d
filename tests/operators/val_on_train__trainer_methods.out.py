import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer, self.criterion = model, optimizer, nn.CrossEntropyLoss()

    def fit_epoch(self, loader):
        self.model.train()
        for images, labels in loader:
            loss = self.criterion(self.model(images), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def score(self, loader):
        self.model.eval()
        losses = [self.criterion(self.model(images), labels).item() for images, labels in loader]
        return sum(losses) / len(losses)


def main(model, optimizer, train_dl, test_dl):
    trainer = Trainer(model, optimizer)
    for epoch in range(20):
        trainer.fit_epoch(train_dl)
        print(f"epoch {epoch}: test loss {trainer.score(train_dl):.3f}")
