"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
DIM = 16


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
def eval_model(net, batches, objective, dev):
    net.eval()
    running_loss = 0.0
    right = 0
    total = 0
    for batch_x, yb in batches:
        batch_x = batch_x.to(dev)
        yb = yb.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = net(batch_x)
        running_loss += objective(logits.float(), yb).item() * len(yb)
        right += (logits.argmax(1) == yb).sum().item()
        total += len(yb)
    return running_loss / total, right / total


def make_dataset(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    means = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * K, (seen,), generator=gen)
    inputs = means[blob] + torch.randn(seen, DIM, generator=gen)
    return inputs, blob % K


def reseed_worker(worker_index: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


def run_training(network, training_data, valid_dl, where, num_epochs=4, base_lr=1e-2, ckpt_path="best.pt"):
    network.to(where)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    optim_ = torch.optim.AdamW(network.parameters(), lr=base_lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=num_epochs * len(training_data))
    lowest_val = math.inf
    best_ep = None
    for ep in range(num_epochs):
        fit_loss = run_epoch(network, training_data, loss_fn, optim_, schedule, where)
        holdout_loss, val_acc = eval_model(network, valid_dl, loss_fn, where)
        print(f"epoch {ep}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_ep = ep
            torch.save({"model": network.state_dict(), "optimizer": optim_.state_dict(), "epoch": ep}, ckpt_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return network


def run_epoch(learner, dl, loss_function, opt, sched, target_device, clip_norm=0.1):
    learner.train()
    cum_loss, n_examples = 0.0, 0
    for xb, targets in dl:
        xb = xb.to(target_device, non_blocking=True)
        targets = targets.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = learner(xb)
        cost = loss_function(outputs.float(), targets)
        cost.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), clip_norm)
        opt.step()
        cum_loss += cost.item() * len(targets)
        n_examples += len(targets)
    sched.step()
    return cum_loss / n_examples


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_data = PointDataset(*make_dataset(1024, rng_seed=1), jitter=0.3)
    val_data = PointDataset(*make_dataset(512, rng_seed=2))
    train_batches = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0))
    holdout = DataLoader(val_data, batch_size=128)
    run_training(Net(), train_batches, holdout, device)


class Net(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.deep = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, width))
        self.shortcut = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        z = torch.relu(self.deep(z) + self.shortcut(z))
        return self.head(self.drop(z))


def resolve_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


if __name__ == "__main__":
    entry()
