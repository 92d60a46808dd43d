"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CLASSES = 4
N_FEATURES = 16


def resolve_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


class Net(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.deep = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, width))
        self.shortcut = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        z = torch.relu(self.deep(z) + self.shortcut(z))
        return self.head(self.drop(z))


def synth_data(seen: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    centers = torch.randn(2 * CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    batch_x = centers[component] + torch.randn(seen, N_FEATURES, generator=gen)
    return batch_x, component % CLASSES


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_ds = PointDataset(*synth_data(1024, random_seed=1), jitter=0.3)
    valid_set = PointDataset(*synth_data(512, random_seed=2))
    train_batches = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              generator=torch.Generator().manual_seed(0))
    val_batches = DataLoader(valid_set, batch_size=128)
    train_model(Net(), train_batches, val_batches, device)


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


def train_model(clf, train_dl, holdout, dev, max_epochs=4, base_lr=1e-2, save_path="best.pt"):
    clf.to(dev)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    optim_ = torch.optim.AdamW(clf.parameters(), lr=base_lr, weight_decay=0.01)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=max_epochs * len(train_dl))
    lowest_val = math.inf
    best_idx = None
    for e in range(max_epochs):
        epoch_loss = train_epoch(clf, train_dl, loss_fn, optim_, lr_schedule, dev)
        va_loss, score = score_model(clf, holdout, loss_fn, dev)
        print(f"epoch {e}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {score:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if va_loss < lowest_val:
            lowest_val, best_idx = va_loss, e
            torch.save({"model": clf.state_dict(), "optimizer": optim_.state_dict(), "epoch": e}, save_path)
    if best_idx is not None:
        clf.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return clf


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


@torch.no_grad()
def score_model(network, dl, objective, where):
    network.eval()
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


if __name__ == "__main__":
    run()
