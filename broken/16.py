"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
DIM = 16


def sample_points(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    means = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * K, (seen,), generator=gen)
    inputs = means[blob] + torch.randn(seen, DIM, generator=gen)
    return 100 + 25 * inputs, blob % K


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = sample_points(1024, rng_seed=1)
    mean, std = x.mean(0), x.std(0)
    train_ds = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = sample_points(500, rng_seed=2)
    val_data = NoisyPoints((val_x - mean) / std, val_y)
    train_dl = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    run_training(Net(), train_dl, holdout, device)


@torch.no_grad()
def score_model(clf, batches, loss_fn, where):
    clf.eval()
    running_loss = 0.0
    right = 0
    total = 0
    for batch_x, yb in batches:
        batch_x, yb = batch_x.to(where), yb.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = clf(batch_x)
        running_loss += loss_fn(scores.float(), yb).item() * len(yb)
        right += (scores.argmax(1) == yb).sum().item()
        total += len(yb)
    return running_loss / total, right / total


def get_device(asked: str | None) -> torch.device:
    device_name = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def init_worker(worker: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def train_epoch(learner, dl, loss_function, opt, schedule, target_device, grad_clip=0.1):
    learner.train()
    loss_sum = 0.0
    count = 0
    for features, labels in dl:
        features = features.to(target_device, non_blocking=True)
        labels = labels.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = learner(features)
        err = loss_function(logits.float(), labels)
        err.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), grad_clip)
        opt.step()
        schedule.step()
        loss_sum += err.item() * len(labels)
        count += len(labels)
    return loss_sum / count


def run_training(net, training_data, valid_dl, dev, n_epochs=4, base_lr=1e-2, best_path="best.pt"):
    net.to(dev)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in net.parameters() if probs.dim() >= 2]
    no_decay = [q for q in net.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.01}]
    updater = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=base_lr, total_steps=n_epochs * len(training_data))
    best_loss = math.inf
    best_idx = None
    for ep in range(n_epochs):
        tr_loss = train_epoch(net, training_data, objective, updater, lr_schedule, dev)
        eval_loss, val_acc = score_model(net, valid_dl, objective, dev)
        print(f"epoch {ep}  train {tr_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_loss:
            best_loss = eval_loss
            best_idx = ep
            torch.save({"model": net.state_dict(), "optimizer": updater.state_dict(), "epoch": ep}, best_path)
    if best_idx is not None:
        net.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return net


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        for block in self.blocks:
            hidden = hidden + block(hidden)
            hidden = hidden * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(hidden)))


class NoisyPoints(Dataset):
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


if __name__ == "__main__":
    run()
