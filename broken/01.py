"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
N_FEATURES = 16


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


def train_epoch(net, batch_iter, loss_function, opt, schedule, target_device, clip=0.1):
    net.train()
    loss_sum = 0.0
    n_examples = 0
    for features, yb in batch_iter:
        features = features.to(target_device, non_blocking=True)
        yb = yb.to(target_device, non_blocking=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = net(features)
        batch_loss = loss_function(outputs.float(), yb)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()
        schedule.step()
        loss_sum += batch_loss.item() * len(yb)
        n_examples += len(yb)
    return loss_sum / n_examples


def run_training(learner, training_data, valid_dl, dev, num_epochs=4, learning_rate=1e-2, best_path="best.pt"):
    learner.to(dev)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in learner.parameters() if prob.dim() >= 2]
    no_decay = [probs for probs in learner.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=learning_rate)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=learning_rate, total_steps=num_epochs * len(training_data))
    best_score = math.inf
    best_idx = None
    for ep in range(num_epochs):
        fit_loss = train_epoch(learner, training_data, objective, updater, lr_schedule, dev)
        va_loss, accuracy = eval_model(learner, valid_dl, objective, dev)
        print(f"epoch {ep}  train {fit_loss:.4f}  val {va_loss:.4f}  acc {accuracy:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if va_loss < best_score:
            best_score = va_loss
            best_idx = ep
            torch.save({"model": learner.state_dict(), "optimizer": updater.state_dict(), "epoch": ep}, best_path)
    if best_idx is not None:
        learner.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return learner


def run() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(cli.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = make_dataset(1024, rng_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = make_dataset(500, rng_seed=2)
    val_ds = NoisyPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_ds, batch_size=128)
    run_training(Net(), train_batches, holdout, device)


def worker_init(worker: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def get_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


@torch.no_grad()
def eval_model(clf, dl, loss_fn, where):
    clf.train(False)
    cum_loss, hits, total = 0.0, 0, 0
    for inputs, labels in dl:
        inputs = inputs.to(where)
        labels = labels.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            preds = clf(inputs)
        cum_loss += loss_fn(preds.float(), labels).item() * len(labels)
        hits += (preds.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, hits / total


def make_dataset(count: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    anchors = torch.randn(2 * K, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * K, (count,), generator=gen)
    batch_x = anchors[group] + torch.randn(count, N_FEATURES, generator=gen)
    return 100 + 25 * batch_x, group % K


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


if __name__ == "__main__":
    run()
