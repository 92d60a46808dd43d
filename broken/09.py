"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
D_IN = 16


class PointDataset(Dataset):
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
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, labels = synth_data(1024, random_seed=1)
    mean, std = x.mean(0), x.std(0)
    train_ds = PointDataset((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = synth_data(500, random_seed=2)
    valid_set = PointDataset((val_x - mean) / std, val_y)
    train_dl = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    valid_dl = DataLoader(valid_set, batch_size=128)
    train_model(BranchNet(), train_dl, valid_dl, device)


def get_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def synth_data(seen: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    anchors = torch.randn(2 * K, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * K, (seen,), generator=gen)
    inputs = anchors[component] + torch.randn(seen, D_IN, generator=gen)
    return 100 + 25 * inputs, component % K


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
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


def worker_init(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


def fit_epoch(network, batch_iter, objective, optim_, lr_schedule, dev, clip=0.1):
    network.train()
    loss_sum = 0.0
    count = 0
    for batch_x, targets in batch_iter:
        batch_x = batch_x.to(dev, non_blocking=True)
        targets = targets.to(dev, non_blocking=True)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            preds = network(batch_x)
        cost = objective(preds.float(), targets)
        cost.backward()
        optim_.step()
        nn.utils.clip_grad_norm_(network.parameters(), clip)
        lr_schedule.step()
        loss_sum += cost.item() * len(targets)
        count += len(targets)
    return loss_sum / count


def train_model(net, train_batches, val_batches, target_device, n_epochs=4, peak_lr=1e-2, save_path="best.pt"):
    net.to(target_device)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in net.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in net.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=peak_lr, total_steps=n_epochs * len(train_batches))
    best_score = math.inf
    best_ep = None
    for e in range(n_epochs):
        epoch_loss = fit_epoch(net, train_batches, loss_fn, opt, sched, target_device)
        holdout_loss, accuracy = score_model(net, val_batches, loss_fn, target_device)
        print(f"epoch {e}  train {epoch_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if holdout_loss < best_score:
            best_score, best_ep = holdout_loss, e
            torch.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": e}, save_path)
    if best_ep is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


@torch.no_grad()
def score_model(learner, batches, loss_function, where):
    learner.train(False)
    running_loss = 0.0
    hits = 0
    total = 0
    for features, yb in batches:
        features = features.to(where)
        yb = yb.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            outputs = learner(features)
        running_loss += loss_function(outputs.float(), yb).item() * len(yb)
        hits += (outputs.argmax(1) == yb).sum().item()
        total += len(yb)
    return running_loss / total, hits / total


if __name__ == "__main__":
    entry()
