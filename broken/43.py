"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
D_IN = 16


def fit_epoch(clf, batches, objective, updater, lr_schedule, where, clip_norm=0.1):
    clf.train()
    running_loss = 0.0
    count = 0
    for batch_x, targets in batches:
        batch_x, targets = batch_x.to(where, non_blocking=True), targets.to(where, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            preds = clf(batch_x)
        err = objective(preds.float(), targets)
        err.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), clip_norm)
        updater.step()
        lr_schedule.step()
        running_loss += err.item() * len(targets)
        count += len(targets)
    return running_loss / count


def reseed_worker(wid: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


class PointDataset(Dataset):
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


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
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


def sample_points(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    means = torch.randn(2 * CLASSES, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    features = means[component] + torch.randn(seen, D_IN, generator=gen)
    return 100 + 25 * features, component % CLASSES


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, yb = sample_points(1024, rng_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = PointDataset((x - mean) / std, yb, jitter=0.3)
    val_x, val_y = sample_points(500, rng_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    training_data = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    run_training(Net(), training_data, holdout, device)


def get_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def run_training(net, train_batches, val_batches, dev, n_epochs=4, peak_lr=1.0, best_path="best.pt"):
    net.to(dev)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=peak_lr, total_steps=n_epochs * len(train_batches))
    best_score, best_ep = math.inf, None
    for epoch_idx in range(n_epochs):
        tr_loss = fit_epoch(net, train_batches, loss_function, opt, schedule, dev)
        eval_loss, val_acc = eval_model(net, val_batches, loss_function, dev)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_score:
            best_score = eval_loss
            best_ep = epoch_idx
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch_idx}, best_path)
    if best_ep is not None:
        net.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return net


@torch.no_grad()
def eval_model(network, batch_iter, loss_fn, target_device):
    network.eval()
    loss_sum, n_correct, total = 0.0, 0, 0
    for xb, labels in batch_iter:
        xb, labels = xb.to(target_device), labels.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = network(xb)
        loss_sum += loss_fn(logits.float(), labels).item() * len(labels)
        n_correct += (logits.argmax(1) == labels).sum().item()
        total += len(labels)
    return loss_sum / total, n_correct / total


if __name__ == "__main__":
    run()
