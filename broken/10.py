"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
DIM = 16


def train_model(network, train_batches, holdout, where, max_epochs=4, learning_rate=1e-2, save_path="best.pt"):
    network.to(where)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in network.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in network.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=learning_rate)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=learning_rate, total_steps=max_epochs * len(train_batches))
    lowest_val = math.inf
    best_idx = None
    for ep in range(max_epochs):
        epoch_loss = fit_epoch(network, train_batches, loss_fn, opt, sched, where)
        va_loss, val_acc = score_model(network, holdout, loss_fn, where)
        print(f"epoch {ep}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {val_acc:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if va_loss < lowest_val:
            lowest_val = va_loss
            best_idx = ep
            torch.save({"model": network.state_dict(), "optimizer": opt.state_dict(), "epoch": ep}, save_path)
    if best_idx is not None:
        network.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return network


class TwoPathMLP(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


@torch.no_grad()
def score_model(net, batch_iter, objective, target_device):
    net.train(False)
    running_loss = 0.0
    hits = 0
    count = 0
    for inputs, labels in batch_iter:
        inputs, labels = inputs.to(target_device), labels.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = net(inputs)
        running_loss += objective(logits.float(), labels).item() * len(labels)
        hits += (logits.argmax(1) == labels).sum().item()
        count += len(labels)
    return running_loss / count, hits / count


def cli_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, targets = make_dataset(1024, rng_seed=1)
    mean, std = x.mean(0), x.std(0)
    training_set = PointDataset((x - mean) / std, targets, jitter=0.3)
    val_x, val_y = make_dataset(500, rng_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    training_data = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    valid_dl = DataLoader(val_data, batch_size=128)
    train_model(TwoPathMLP(), training_data, valid_dl, device)


def worker_init(worker: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


def make_dataset(total: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    anchors = torch.randn(2 * CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * CLASSES, (total,), generator=gen)
    features = anchors[component] + torch.randn(total, DIM, generator=gen)
    return 100 + 25 * features, component % CLASSES


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


def fit_epoch(learner, dl, loss_function, optim_, schedule, dev, clip=0.1):
    learner.train()
    cum_loss = 0.0
    n_examples = 0
    for batch_x, batch_y in dl:
        batch_x, batch_y = batch_x.to(dev, non_blocking=True), batch_y.to(dev, non_blocking=True)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            outputs = learner(batch_x)
        err = loss_function(outputs.float(), batch_y)
        err.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), clip)
        schedule.step()
        cum_loss += err.item() * len(batch_y)
        n_examples += len(batch_y)
    return cum_loss / n_examples


def get_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


if __name__ == "__main__":
    cli_main()
