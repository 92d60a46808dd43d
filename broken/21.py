"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
DIM = 16


def fit_epoch(learner, batch_iter, loss_fn, updater, schedule, where, clip=0.1):
    learner.train()
    loss_sum = 0.0
    n_examples = 0
    for inputs, batch_y in batch_iter:
        inputs = inputs.to(where, non_blocking=True)
        batch_y = batch_y.to(where, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            outputs = learner(inputs)
        err = loss_fn(outputs.float(), batch_y)
        err.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), clip)
        updater.step()
        schedule.step()
        loss_sum += err.item() * len(batch_y)
        n_examples += len(batch_y)
    return loss_sum / n_examples


def train_model(net, train_batches, val_batches, dev, max_epochs=4, base_lr=1e-2, save_path="best.pt"):
    net.to(dev)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=base_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=base_lr, total_steps=max_epochs * len(train_batches))
    best_loss, best_at = math.inf, None
    for e in range(max_epochs):
        tr_loss = fit_epoch(net, train_batches, loss_function, opt, sched, dev)
        holdout_loss, score = validate(net, val_batches, loss_function, dev)
        print(f"epoch {e}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if holdout_loss < best_loss:
            best_loss = holdout_loss
            best_at = e
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": e}, save_path)
    if best_at is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


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


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, labels = make_dataset(1024, random_seed=1)
    train_data = AugmentedPoints(x, labels, jitter=0.3)
    val_x, val_y = make_dataset(500, random_seed=2)
    val_data = AugmentedPoints(val_x, val_y)
    training_data = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    valid_dl = DataLoader(val_data, batch_size=128)
    train_model(TwoPathMLP(), training_data, valid_dl, device)


def resolve_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


@torch.no_grad()
def validate(network, batches, objective, target_device):
    network.train(False)
    cum_loss = 0.0
    n_correct = 0
    seen = 0
    for batch_x, yb in batches:
        batch_x = batch_x.to(target_device)
        yb = yb.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            scores = network(batch_x)
        cum_loss += objective(scores.float(), yb).item() * len(yb)
        n_correct += (scores.argmax(1) == yb).sum().item()
        seen += len(yb)
    return cum_loss / seen, n_correct / seen


def worker_init(wid: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def make_dataset(total: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    means = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * K, (total,), generator=gen)
    features = means[group] + torch.randn(total, DIM, generator=gen)
    return 100 + 25 * features, group % K


class TwoPathMLP(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        for block in self.blocks:
            z = z + block(z)
            z = z * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(z)))


if __name__ == "__main__":
    entry()
