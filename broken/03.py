"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
N_FEATURES = 16


class TwoPathMLP(nn.Module):
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


def synth_data(total: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    means = torch.randn(2 * N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * N_CLASSES, (total,), generator=gen)
    batch_x = means[component] + torch.randn(total, N_FEATURES, generator=gen)
    return 100 + 25 * batch_x, component % N_CLASSES


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, targets = synth_data(1024, s=1)
    mean = x.mean(0)
    std = x.std(0)
    training_set = PointDataset((x - mean) / std, targets, jitter=0.3)
    val_x, val_y = synth_data(500, s=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    train_batches = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_data, batch_size=128)
    run_training(TwoPathMLP(), train_batches, val_batches, device)


def resolve_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def init_worker(worker_index: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def run_epoch(net, batches, loss_fn, opt, sched, where, grad_clip=0.1):
    net.train()
    cum_loss = 0.0
    seen = 0
    for inputs, labels in batches:
        inputs, labels = inputs.to(where, non_blocking=True), labels.to(where, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = net(inputs)
        err = loss_fn(logits.float(), labels)
        err.backward()
        nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
        opt.step()
        sched.step()
        cum_loss += err.item() * len(labels)
        seen += len(labels)
    return cum_loss / seen


class PointDataset(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        features = self.x[i]
        if self.jitter:
            features = features + self.jitter * torch.randn(features.shape, generator=self.rng)
        return features, self.y[i]


@torch.no_grad()
def validate(clf, dl, loss_function, target_device):
    running_loss = 0.0
    n_correct = 0
    count = 0
    for xb, yb in dl:
        xb = xb.to(target_device)
        yb = yb.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            scores = clf(xb)
        running_loss += loss_function(scores.float(), yb).item() * len(yb)
        n_correct += (scores.argmax(1) == yb).sum().item()
        count += len(yb)
    return running_loss / count, n_correct / count


def run_training(learner, train_dl, valid_dl, dev, n_epochs=4, base_lr=1e-2, ckpt_path="best.pt"):
    learner.to(dev)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in learner.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in learner.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=base_lr, total_steps=n_epochs * len(train_dl))
    lowest_val, best_idx = math.inf, None
    for epoch_idx in range(n_epochs):
        epoch_loss = run_epoch(learner, train_dl, objective, updater, lr_schedule, dev)
        holdout_loss, accuracy = validate(learner, valid_dl, objective, dev)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_idx = epoch_idx
            torch.save({"model": learner.state_dict(), "optimizer": updater.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_idx is not None:
        learner.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return learner


if __name__ == "__main__":
    entry()
