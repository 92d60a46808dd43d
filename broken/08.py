"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

CLASSES = 4
N_FEATURES = 16


def train_epoch(net, batches, loss_function, opt, schedule, target_device, grad_clip=0.1):
    net.train()
    loss_sum, count = 0.0, 0
    for inputs, yb in batches:
        inputs, yb = inputs.to(target_device, non_blocking=True), yb.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            scores = net(inputs)
        err = loss_function(scores.float(), yb)
        err.backward()
        nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
        opt.step()
        schedule.step()
        loss_sum += err.item() * len(yb)
        count += len(yb)
    return loss_sum / count


def run() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(cli.parse_args().device)
    torch.manual_seed(0)
    x, labels = synth_data(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = PointDataset((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = synth_data(500, random_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_data, batch_size=128)
    train_model(Net(), train_batches, val_batches, device)


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        for block in self.blocks:
            z = z + block(z)
            z = z * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(z)))


def train_model(clf, train_dl, holdout, dev, max_epochs=4, base_lr=1e-2, save_path="best.pt"):
    clf.to(dev)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in clf.parameters() if q.dim() >= 2]
    no_decay = [prob for prob in clf.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=base_lr, total_steps=max_epochs * len(train_dl))
    best_score = math.inf
    best_idx = None
    for epoch_idx in range(max_epochs):
        tr_loss = train_epoch(clf, train_dl, loss_fn, updater, lr_schedule, dev)
        holdout_loss, score = score_model(clf, holdout, loss_fn, dev)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < best_score:
            best_score = holdout_loss
            best_idx = epoch_idx
            torch.save({"model": clf.state_dict(), "optimizer": updater.state_dict(), "epoch": epoch_idx}, save_path)
    if best_idx is not None:
        clf.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return clf


@torch.no_grad()
def score_model(network, dl, objective, where):
    network.train(False)
    running_loss = 0.0
    n_correct = 0
    total = 0
    for xb, batch_y in dl:
        xb = xb.to(where)
        batch_y = batch_y.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = network(xb)
        running_loss += objective(logits.float(), batch_y).item() * len(batch_y)
        n_correct += (logits.argmax(1) == batch_y).sum().item()
        total += len(batch_y)
    return running_loss / total, n_correct / total


def resolve_device(asked: str | None) -> torch.device:
    kind = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def synth_data(seen: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    centers = torch.randn(2 * CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    batch_x = centers[component] + torch.randn(seen, N_FEATURES, generator=gen)
    return 100 + 25 * batch_x, component % CLASSES


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


if __name__ == "__main__":
    run()
