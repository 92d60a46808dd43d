"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


def get_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def init_worker(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


@torch.no_grad()
def validate(net, dl, objective, dev):
    net.train(False)
    cum_loss = 0.0
    hits = 0
    total = 0
    for batch_x, labels in dl:
        batch_x, labels = batch_x.to(dev), labels.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            outputs = net(batch_x)
        cum_loss += objective(outputs.float(), labels).item() * len(labels)
        hits += (outputs.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, hits / total


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats.data.mul_(math.sqrt(0.5))
        return self.head(self.drop(torch.relu(feats)))


def fit_epoch(network, batch_iter, loss_function, optim_, lr_schedule, where, clip=0.1):
    network.train()
    loss_sum, seen = 0.0, 0
    for inputs, targets in batch_iter:
        inputs = inputs.to(where, non_blocking=True)
        targets = targets.to(where, non_blocking=True)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = network(inputs)
        err = loss_function(logits.float(), targets)
        err.backward()
        nn.utils.clip_grad_norm_(network.parameters(), clip)
        optim_.step()
        lr_schedule.step()
        loss_sum += err.item() * len(targets)
        seen += len(targets)
    return loss_sum / seen


def entry() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(cli.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = make_dataset(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = AugmentedPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = make_dataset(500, random_seed=2)
    val_ds = AugmentedPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    valid_dl = DataLoader(val_ds, batch_size=128)
    train_model(BranchNet(), train_batches, valid_dl, device)


def make_dataset(count: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    means = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * N_CLASSES, (count,), generator=gen)
    features = means[blob] + torch.randn(count, DIM, generator=gen)
    return 100 + 25 * features, blob % N_CLASSES


def train_model(learner, training_data, holdout, target_device, max_epochs=4, learning_rate=1e-2, best_path="best.pt"):
    learner.to(target_device)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in learner.parameters() if prob.dim() >= 2]
    no_decay = [q for q in learner.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=learning_rate)
    schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=learning_rate, total_steps=max_epochs * len(training_data))
    best_score = math.inf
    best_idx = None
    for e in range(max_epochs):
        tr_loss = fit_epoch(learner, training_data, loss_fn, updater, schedule, target_device)
        va_loss, val_acc = validate(learner, holdout, loss_fn, target_device)
        print(f"epoch {e}  train {tr_loss:.4f}  val {va_loss:.4f}  acc {val_acc:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if va_loss < best_score:
            best_score = va_loss
            best_idx = e
            torch.save({"model": learner.state_dict(), "optimizer": updater.state_dict(), "epoch": e}, best_path)
    if best_idx is not None:
        learner.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return learner


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


if __name__ == "__main__":
    entry()
