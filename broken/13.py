"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
D_IN = 16


def worker_init(worker_index: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def synth_data(seen: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    centers = torch.randn(2 * K, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * K, (seen,), generator=gen)
    inputs = centers[group] + torch.randn(seen, D_IN, generator=gen)
    return 100 + 25 * inputs, group % K


class PointDataset(Dataset):
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


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(nn.functional.dropout(torch.relu(feats), 0.2))


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, targets = synth_data(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    training_set = PointDataset((x - mean) / std, targets, jitter=0.3)
    val_x, val_y = synth_data(500, random_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    training_data = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    run_training(Net(), training_data, holdout, device)


def run_training(learner, train_batches, valid_dl, target_device, num_epochs=4, base_lr=1e-2, best_path="best.pt"):
    learner.to(target_device)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in learner.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in learner.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=num_epochs * len(train_batches))
    best_loss = math.inf
    best_idx = None
    for ep in range(num_epochs):
        fit_loss = run_epoch(learner, train_batches, objective, optim_, lr_schedule, target_device)
        eval_loss, score = eval_model(learner, valid_dl, objective, target_device)
        print(f"epoch {ep}  train {fit_loss:.4f}  val {eval_loss:.4f}  acc {score:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_loss:
            best_loss, best_idx = eval_loss, ep
            torch.save({"model": learner.state_dict(), "optimizer": optim_.state_dict(), "epoch": ep}, best_path)
    if best_idx is not None:
        learner.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return learner


@torch.no_grad()
def eval_model(clf, batches, loss_fn, where):
    clf.train(False)
    running_loss = 0.0
    right = 0
    total = 0
    for features, batch_y in batches:
        features = features.to(where)
        batch_y = batch_y.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = clf(features)
        running_loss += loss_fn(logits.float(), batch_y).item() * len(batch_y)
        right += (logits.argmax(1) == batch_y).sum().item()
        total += len(batch_y)
    return running_loss / total, right / total


def run_epoch(net, batch_iter, loss_function, updater, schedule, dev, clip=0.1):
    net.train()
    cum_loss, count = 0.0, 0
    for xb, yb in batch_iter:
        xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            outputs = net(xb)
        batch_loss = loss_function(outputs.float(), yb)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        updater.step()
        schedule.step()
        cum_loss += batch_loss.item() * len(yb)
        count += len(yb)
    return cum_loss / count


def get_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


if __name__ == "__main__":
    entry()
