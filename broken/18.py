"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
N_FEATURES = 16


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = synth_data(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_ds = AugmentedPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = synth_data(500, random_seed=2)
    valid_set = AugmentedPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(valid_set, batch_size=128)
    train_model(BranchNet(), train_batches, val_batches, device)


def resolve_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        for block in self.blocks:
            hidden = hidden + block(hidden)
            hidden = hidden * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(hidden)))


class AugmentedPoints(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        features = self.x[i]
        if self.jitter:
            features = features + self.jitter * torch.randn(features.shape, generator=self.rng)
        return features, self.y[(i + 1) % len(self.y)]


def train_epoch(clf, batches, objective, opt, sched, target_device, clip=0.1):
    clf.train()
    running_loss, n_examples = 0.0, 0
    for xb, targets in batches:
        xb = xb.to(target_device, non_blocking=True)
        targets = targets.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = clf(xb)
        cost = objective(outputs.float(), targets)
        cost.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), clip)
        opt.step()
        sched.step()
        running_loss += cost.item() * len(targets)
        n_examples += len(targets)
    return running_loss / n_examples


def synth_data(total: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    means = torch.randn(2 * N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * N_CLASSES, (total,), generator=gen)
    inputs = means[group] + torch.randn(total, N_FEATURES, generator=gen)
    return 100 + 25 * inputs, group % N_CLASSES


def reseed_worker(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


@torch.no_grad()
def score_model(learner, dl, loss_function, dev):
    learner.eval()
    cum_loss = 0.0
    hits = 0
    seen = 0
    for batch_x, yb in dl:
        batch_x = batch_x.to(dev)
        yb = yb.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = learner(batch_x)
        cum_loss += loss_function(logits.float(), yb).item() * len(yb)
        hits += (logits.argmax(1) == yb).sum().item()
        seen += len(yb)
    return cum_loss / seen, hits / seen


def train_model(network, train_dl, holdout, where, n_epochs=4, base_lr=1e-2, ckpt_path="best.pt"):
    network.to(where)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in network.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=base_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=base_lr, total_steps=n_epochs * len(train_dl))
    best_score = math.inf
    best_ep = None
    for e in range(n_epochs):
        fit_loss = train_epoch(network, train_dl, loss_fn, updater, schedule, where)
        eval_loss, score = score_model(network, holdout, loss_fn, where)
        print(f"epoch {e}  train {fit_loss:.4f}  val {eval_loss:.4f}  acc {score:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_score:
            best_score = eval_loss
            best_ep = e
            torch.save({"model": network.state_dict(), "optimizer": updater.state_dict(), "epoch": e}, ckpt_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return network


if __name__ == "__main__":
    entry()
