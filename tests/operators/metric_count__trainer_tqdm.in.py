"""A Trainer whose validation iterates a progress bar and returns a dict of metrics."""
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


class Trainer:
    def __init__(self, model, optimizer, train_set, val_set):
        self.model, self.optimizer = model, optimizer
        self.train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
        self.val_loader = DataLoader(val_set, batch_size=100)

    def train_epoch(self):
        self.model.train()
        n_correct, n_seen = 0, 0
        for inputs, labels in tqdm(self.train_loader, desc="train"):
            self.optimizer.zero_grad()
            logits = self.model(inputs)
            torch.nn.functional.cross_entropy(logits, labels).backward()
            self.optimizer.step()
            n_correct += logits.argmax(-1).eq(labels).sum().item()
            n_seen += labels.shape[0]
        return {"train_acc": n_correct / n_seen}

    @torch.inference_mode()
    def validate(self):
        self.model.eval()
        n_correct, n_seen, loss_sum = 0, 0, 0.0
        for inputs, labels in tqdm(self.val_loader, desc="val", leave=False):
            logits = self.model(inputs)
            loss_sum += torch.nn.functional.cross_entropy(logits, labels, reduction="sum").item()
            n_correct += logits.argmax(-1).eq(labels).sum().item()
            n_seen += labels.shape[0]
        return {"val_loss": loss_sum / n_seen, "val_acc": n_correct / n_seen}
