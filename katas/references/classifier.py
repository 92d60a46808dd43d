"""A correct PyTorch training script: a small classifier on synthetic data.

Every detail of the canonical loop is right: inputs standardised with the
training set's statistics, train/eval toggling, zero_grad(set_to_none=True),
.item() accumulation, clipping before the step, AdamW without decay on biases
and normalisation weights, a per-step OneCycle schedule, validation under
no_grad, a best checkpoint with the optimizer state, and a Dataset whose
augmentation generator is seeded per DataLoader worker, the workers kept from epoch to epoch. Run it with `python reference/classifier.py [--device cuda]`.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

NUM_CLASSES = 4
NUM_FEATURES = 16


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters, two per class, so no single linear cut separates them, in raw sensor units."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * NUM_CLASSES, NUM_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    cluster = torch.randint(0, 2 * NUM_CLASSES, (n,), generator=g)
    x = centres[cluster] + torch.randn(n, NUM_FEATURES, generator=g)
    return 100 + 25 * x, cluster % NUM_CLASSES


class JitteredPoints(Dataset):
    """Feature vectors with optional Gaussian jitter drawn from the dataset's own generator."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i]
        if self.jitter:
            x = x + self.jitter * torch.randn(x.shape, generator=self.rng)
        return x, self.y[i]


def seed_worker(worker_id: int) -> None:
    """Give each worker, in each epoch, its own augmentation stream."""
    info = get_worker_info()
    info.dataset.rng.manual_seed(info.seed)


class Classifier(nn.Module):
    """A stem, a stack of residual blocks, and a head behind dropout."""

    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(NUM_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
            h = h * math.sqrt(0.5)  # the sum of two unit-variance streams, scaled back to unit variance
        return self.head(self.drop(torch.relu(h)))


def train_one_epoch(model, loader, criterion, optimizer, scheduler, device, max_grad_norm=0.1):
    model.train()
    total_loss, n_seen = 0.0, 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = model(x)
        loss = criterion(out.float(), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        total_loss += loss.item() * len(y)
        n_seen += len(y)
    return total_loss / n_seen


@torch.no_grad()
def evaluate(model, loader, criterion, device):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = model(x)
        total_loss += criterion(out.float(), y).item() * len(y)
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    return total_loss / n, correct / n


def fit(model, train_loader, val_loader, device, epochs=4, lr=1e-2, checkpoint="best.pt"):
    model.to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # weight matrices
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and normalisation weights
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=epochs * len(train_loader))
    best_val, best_epoch = math.inf, None
    for epoch in range(epochs):
        train_loss = train_one_epoch(model, train_loader, criterion, optimizer, scheduler, device)
        val_loss, acc = evaluate(model, val_loader, criterion, device)
        print(f"epoch {epoch}  train {train_loss:.4f}  val {val_loss:.4f}  acc {acc:.3f}  lr {scheduler.get_last_lr()[0]:.2e}")
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
    x, y = make_data(1024, seed=1)
    mean, std = x.mean(0), x.std(0)
    train_set = JitteredPoints((x - mean) / std, y, jitter=0.3)
    val_x, val_y = make_data(500, seed=2)
    val_set = JitteredPoints((val_x - mean) / std, val_y)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_loader = DataLoader(val_set, batch_size=128)
    fit(Classifier(), train_loader, val_loader, device)


if __name__ == "__main__":
    main()
