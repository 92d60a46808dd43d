"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


def train_model(net, train_batches, valid_dl, dev, num_epochs=4, peak_lr=1e-2, save_path="best.pt"):
    net.to(dev)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=peak_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=peak_lr, total_steps=num_epochs * len(train_batches))
    best_score = math.inf
    best_idx = None
    for e in range(num_epochs):
        fit_loss = train_epoch(net, train_batches, loss_fn, optim_, lr_schedule, dev)
        va_loss, val_acc = validate(net, valid_dl, loss_fn, dev)
        print(f"epoch {e}  train {fit_loss:.4f}  val {va_loss:.4f}  acc {val_acc:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if va_loss < best_score:
            best_score, best_idx = va_loss, e
            torch.save({"model": net.state_dict(), "optimizer": optim_.state_dict(), "epoch": e}, save_path)
    if best_idx is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


def worker_init(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


class NoisyPoints(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        batch_x = self.x[i]
        if self.jitter:
            batch_x = batch_x + self.jitter * torch.randn(batch_x.shape, generator=self.rng)
        return batch_x, self.y[i]


@torch.no_grad()
def validate(learner, batches, loss_function, where):
    learner.train(False)
    running_loss = 0.0
    hits = 0
    seen = 0
    for features, labels in batches:
        features = features.to(where)
        labels = labels.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = learner(features)
        running_loss += loss_function(logits.float(), labels).item() * len(labels)
        hits += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    return running_loss / seen, hits / seen


def get_device(asked: str | None) -> torch.device:
    device_name = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, yb = sample_points(1024, s=1)
    mean = x.mean(0)
    std = x.std(0)
    train_ds = NoisyPoints((x - mean) / std, yb, jitter=0.3)
    val_x, val_y = sample_points(500, s=2)
    val_ds = NoisyPoints((val_x - mean) / std, val_y)
    training_data = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_ds, batch_size=128)
    train_model(BranchNet(), training_data, val_batches, device)


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        for block in self.blocks:
            z = z + block(z)
            z = z * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(z)))


def train_epoch(clf, batch_iter, objective, updater, sched, target_device, grad_clip=0.1):
    clf.train()
    cum_loss = 0.0
    n_examples = 0
    for xb, batch_y in batch_iter:
        xb = xb.to(target_device, non_blocking=True)
        batch_y = batch_y.to(target_device, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            scores = clf(xb)
        err = objective(scores.float(), batch_y)
        err.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), grad_clip)
        updater.step()
        sched.step()
        cum_loss += err * len(batch_y)
        n_examples += len(batch_y)
    return cum_loss / n_examples


def sample_points(count: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * N_CLASSES, (count,), generator=gen)
    inputs = anchors[component] + torch.randn(count, DIM, generator=gen)
    return 100 + 25 * inputs, component % N_CLASSES


if __name__ == "__main__":
    entry()
