"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
N_FEATURES = 16


def run_training(net, training_data, valid_dl, target_device, num_epochs=4, peak_lr=1e-2, save_path="best.pt"):
    net.to(target_device)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in net.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in net.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=peak_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=peak_lr, total_steps=num_epochs * len(training_data))
    best_score = math.inf
    best_at = None
    for ep in range(num_epochs):
        epoch_loss = run_epoch(net, training_data, objective, updater, lr_schedule, target_device)
        va_loss, score = validate(net, valid_dl, objective, target_device)
        print(f"epoch {ep}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {score:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if va_loss < best_score:
            best_score = va_loss
            best_at = ep
            torch.save({"model": net.state_dict(), "optimizer": updater.state_dict(), "epoch": ep}, save_path)
    if best_at is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


def sample_points(seen: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    anchors = torch.randn(2 * CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    inputs = anchors[blob] + torch.randn(seen, N_FEATURES, generator=gen)
    return 100 + 25 * inputs, blob % CLASSES


def worker_init(worker_index: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


def resolve_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class AugmentedPoints(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        xb = self.x[i]
        if self.jitter:
            xb = xb + self.jitter * torch.randn(xb.shape, generator=self.rng)
        return xb, self.y[i]


def validate(learner, batch_iter, loss_function, dev):
    learner.eval()
    cum_loss = 0.0
    n_correct = 0
    total = 0
    for batch_x, targets in batch_iter:
        batch_x = batch_x.to(dev)
        targets = targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = learner(batch_x)
        cum_loss += loss_function(logits.float(), targets).item() * len(targets)
        n_correct += (logits.argmax(1) == targets).sum().item()
        total += len(targets)
    return cum_loss / total, n_correct / total


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = sample_points(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = AugmentedPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = sample_points(500, random_seed=2)
    val_ds = AugmentedPoints((val_x - mean) / std, val_y)
    train_dl = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_ds, batch_size=128)
    run_training(BranchNet(), train_dl, holdout, device)


def run_epoch(network, batches, loss_fn, opt, sched, where, grad_clip=0.1):
    network.train()
    loss_sum, count = 0.0, 0
    for features, yb in batches:
        features = features.to(where, non_blocking=True)
        yb = yb.to(where, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = network(features)
        err = loss_fn(scores.float(), yb)
        err.backward()
        nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
        opt.step()
        sched.step()
        loss_sum += err.item() * len(yb)
        count += len(yb)
    return loss_sum / count


if __name__ == "__main__":
    run()
