"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


@torch.no_grad()
def score_model(network, dl, objective, dev):
    network.eval()
    loss_sum = 0.0
    hits = 0
    count = 0
    for features, targets in dl:
        features = features.to(dev)
        targets = targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores = network(features)
        loss_sum += objective(scores.float(), targets).item() * len(targets)
        hits += (scores.argmax(1) == targets).sum().item()
        count += len(targets)
    return loss_sum / count, hits / count


def fit_epoch(net, batch_iter, loss_fn, updater, sched, target_device, grad_clip=0.1):
    net.train()
    running_loss = 0.0
    seen = 0
    for xb, yb in batch_iter:
        xb, yb = xb.to(target_device, non_blocking=True), yb.to(target_device, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            preds = net(xb)
        err = loss_fn(preds.float(), yb)
        err.backward()
        nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
        updater.step()
        sched.step()
        running_loss += err.item() * len(yb)
        seen += len(yb)
    return running_loss / seen


def worker_init(worker_index: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


class NoisyPoints(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        inputs = self.x[i]
        if self.jitter:
            inputs = inputs + self.jitter * torch.randn(inputs.shape, generator=self.rng)
        return inputs, self.y[i]


def train_model(clf, train_batches, holdout, where, n_epochs=4, learning_rate=1e-2, ckpt_path="best.pt"):
    clf.to(where)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in clf.parameters() if probs.dim() >= 2]
    no_decay = [q for q in clf.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=learning_rate)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=learning_rate, total_steps=n_epochs * len(train_batches))
    lowest_val, best_ep = math.inf, None
    for epoch_idx in range(n_epochs):
        fit_loss = fit_epoch(clf, train_batches, loss_function, optim_, schedule, where)
        holdout_loss, score = score_model(clf, holdout, loss_function, where)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_ep = epoch_idx
            torch.save({"model": clf.state_dict(), "optimizer": optim_.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_ep is not None:
        clf.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return clf


def choose_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def sample_points(total: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    means = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * N_CLASSES, (total,), generator=gen)
    batch_x = means[component] + torch.randn(total, DIM, generator=gen)
    return 100 + 25 * batch_x, component % N_CLASSES


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = sample_points(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = sample_points(500, random_seed=2)
    val_data = NoisyPoints((val_x - mean) / std, val_y)
    train_dl = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_data, batch_size=128)
    train_model(BranchNet(), train_dl, val_batches, device)


if __name__ == "__main__":
    run()
