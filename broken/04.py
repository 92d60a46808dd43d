"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
D_IN = 16


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        for block in self.blocks:
            hidden = hidden + block(hidden)
            hidden = hidden * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(hidden)))


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = synth_data(1024, s=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = synth_data(500, s=2)
    val_data = NoisyPoints((val_x - mean) / std, val_y)
    training_data = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(val_data, batch_size=128)
    train_model(Net(), training_data, val_batches, device)


def synth_data(total: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * CLASSES, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * CLASSES, (total,), generator=gen)
    xb = anchors[blob] + torch.randn(total, D_IN, generator=gen)
    return 100 + 25 * xb, blob % CLASSES


def worker_init(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


@torch.no_grad()
def eval_model(net, batch_iter, objective, where):
    net.eval()
    loss_sum, hits, seen = 0.0, 0, 0
    for batch_x, targets in batch_iter:
        batch_x = batch_x.to(where)
        targets = targets.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            preds = net(batch_x)
        loss_sum += objective(preds.float(), targets).item() * len(targets)
        hits += (preds.argmax(1) == targets).sum().item()
        seen += len(targets)
    return loss_sum / seen, hits / seen


class NoisyPoints(Dataset):
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


def choose_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def train_model(network, train_batches, valid_dl, target_device, num_epochs=4, base_lr=1e-2, best_path="best.pt"):
    network.to(target_device)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in network.parameters() if prob.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=num_epochs * len(train_batches))
    best_score = math.inf
    best_ep = None
    for epoch_idx in range(num_epochs):
        epoch_loss = fit_epoch(network, train_batches, loss_function, optim_, lr_schedule, target_device)
        eval_loss, accuracy = eval_model(network, valid_dl, loss_function, target_device)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {eval_loss:.4f}  acc {accuracy:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_score:
            best_score = eval_loss
            best_ep = epoch_idx
            torch.save({"model": network.state_dict(), "optimizer": optim_.state_dict(), "epoch": epoch_idx}, best_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return network


def fit_epoch(learner, batches, loss_fn, updater, sched, dev, grad_clip=0.1):
    cum_loss = 0.0
    n_examples = 0
    for inputs, yb in batches:
        inputs = inputs.to(dev, non_blocking=True)
        yb = yb.to(dev, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = learner(inputs)
        cost = loss_fn(logits.float(), yb)
        cost.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), grad_clip)
        updater.step()
        sched.step()
        cum_loss += cost.item() * len(yb)
        n_examples += len(yb)
    return cum_loss / n_examples


if __name__ == "__main__":
    run()
