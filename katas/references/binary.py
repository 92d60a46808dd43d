"""A correct PyTorch training script: binary classification with a hand-written loss.

The loss is binary cross-entropy written in probability space. The data are
well separated, so the model grows confident fast and sigmoid outputs round to
exactly 0 or 1 in float32: without the clamp below, log(0) turns the loss into
NaN within the first epoch. Run it with `python reference/binary.py [--device cuda]`.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

NUM_FEATURES = 8
EPS = 1e-6


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian blobs far apart, labels 0 and 1 in equal measure."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g).float()
    x = torch.randn(n, NUM_FEATURES, generator=g) + 3.0 * (2 * y[:, None] - 1)
    return x, y


def binary_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean BCE computed from probabilities, kept away from log(0) by a clamp."""
    p = torch.sigmoid(logits.float()).clamp(EPS, 1 - EPS)
    return -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()


class Scorer(nn.Module):
    """An encoder followed by a scoring head that outputs one logit per example."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(NUM_FEATURES, width), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)).squeeze(-1)


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    total_loss, n_seen = 0.0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(x)
        loss = binary_cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(y)
        n_seen += len(y)
    return total_loss / n_seen


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(x)
        total_loss += binary_cross_entropy(logits, y).item() * len(y)
        correct += ((logits > 0).float() == y).sum().item()
        n += len(y)
    return total_loss / n, correct / n


def fit(model, train_loader, val_loader, device, epochs=3, lr=0.05, checkpoint="best.pt"):
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    best_val, best_epoch = math.inf, None
    for epoch in range(epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, device)
        val_loss, acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}  train {train_loss:.4f}  val {val_loss:.4f}  acc {acc:.3f}")
        if val_loss < best_val:
            best_val, best_epoch = val_loss, epoch
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, checkpoint)
    if best_epoch is not None:
        model.load_state_dict(torch.load(checkpoint, weights_only=True)["model"])
    return model


def pick_device(requested: str | None) -> torch.device:
    name = requested or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = pick_device(parser.parse_args().device)
    torch.manual_seed(0)
    train_loader = DataLoader(TensorDataset(*make_data(1024, seed=1)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(TensorDataset(*make_data(512, seed=2)), batch_size=128)
    fit(Scorer(), train_loader, val_loader, device)


if __name__ == "__main__":
    main()
