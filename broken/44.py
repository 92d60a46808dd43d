"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
N_FEATURES = 16


def run_training(net, train_dl, holdout, dev, max_epochs=4, learning_rate=1e-2, ckpt_path="best.pt"):
    net.to(dev)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in net.parameters() if probs.dim() >= 2]
    no_decay = [q for q in net.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=learning_rate)
    sched = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=learning_rate, total_steps=max_epochs * len(train_dl))
    lowest_val, best_ep = math.inf, None
    for e in range(max_epochs):
        fit_loss = run_epoch(net, train_dl, loss_fn, optim_, sched, dev)
        holdout_loss, accuracy = score_model(net, holdout, loss_fn, dev)
        print(f"epoch {e}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val, best_ep = holdout_loss, e
            torch.save({"model": net.state_dict(), "optimizer": optim_.state_dict(), "epoch": e}, ckpt_path)
    if best_ep is not None:
        net.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return net


def make_dataset(count: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    centers = torch.randn(2 * K, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * K, (count,), generator=gen)
    batch_x = centers[blob] + torch.randn(count, N_FEATURES, generator=gen)
    batch_x[:, -1] = blob % K
    return 100 + 25 * batch_x, blob % K


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


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, labels = make_dataset(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    training_set = AugmentedPoints((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = make_dataset(500, random_seed=2)
    val_ds = AugmentedPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_ds, batch_size=128)
    run_training(Net(), train_batches, val_batches, device)


def run_epoch(network, batch_iter, objective, updater, schedule, where, grad_clip=0.1):
    network.train()
    running_loss = 0.0
    n_examples = 0
    for inputs, targets in batch_iter:
        inputs = inputs.to(where, non_blocking=True)
        targets = targets.to(where, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = network(inputs)
        cost = objective(logits.float(), targets)
        cost.backward()
        nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
        updater.step()
        schedule.step()
        running_loss += cost.item() * len(targets)
        n_examples += len(targets)
    return running_loss / n_examples


@torch.no_grad()
def score_model(learner, batches, loss_function, target_device):
    learner.train(False)
    loss_sum = 0.0
    right = 0
    total = 0
    for features, yb in batches:
        features = features.to(target_device)
        yb = yb.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = learner(features)
        loss_sum += loss_function(outputs.float(), yb).item() * len(yb)
        right += (outputs.argmax(1) == yb).sum().item()
        total += len(yb)
    return loss_sum / total, right / total


def get_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
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


def init_worker(worker: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


if __name__ == "__main__":
    run()
