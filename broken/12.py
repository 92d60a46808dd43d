"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


def run_epoch(net, dl, loss_fn, opt, schedule, target_device, clip=0.1):
    net.train()
    loss_sum, n_examples = 0.0, 0
    for inputs, targets in dl:
        inputs, targets = inputs.to(target_device, non_blocking=True), targets.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = net(inputs)
        batch_loss = loss_fn(outputs.float().softmax(dim=1), targets)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()
        schedule.step()
        loss_sum += batch_loss.item() * len(targets)
        n_examples += len(targets)
    return loss_sum / n_examples


def init_worker(worker: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


class NoisyPoints(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, jitter: float = 0.0):
        self.x, self.y, self.jitter = x, y, jitter
        self.rng = torch.Generator().manual_seed(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        batch_x = self.x[i]
        if self.jitter:
            batch_x = batch_x + self.jitter * torch.randn(batch_x.shape, generator=self.rng)
        return batch_x, self.y[i]


def entry() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(cli.parse_args().device)
    torch.manual_seed(0)
    x, labels = synth_data(1024, s=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = NoisyPoints((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = synth_data(500, s=2)
    valid_set = NoisyPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(valid_set, batch_size=128)
    train_model(TwoPathMLP(), train_batches, val_batches, device)


def get_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


@torch.no_grad()
def validate(clf, batches, loss_function, dev):
    clf.eval()
    running_loss = 0.0
    n_correct = 0
    total = 0
    for xb, batch_y in batches:
        xb, batch_y = xb.to(dev), batch_y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            preds = clf(xb)
        running_loss += loss_function(preds.float(), batch_y).item() * len(batch_y)
        n_correct += (preds.argmax(1) == batch_y).sum().item()
        total += len(batch_y)
    return running_loss / total, n_correct / total


def train_model(network, training_data, valid_dl, where, max_epochs=4, base_lr=1e-2, ckpt_path="best.pt"):
    network.to(where)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=max_epochs * len(training_data))
    best_score = math.inf
    best_idx = None
    for ep in range(max_epochs):
        epoch_loss = run_epoch(network, training_data, objective, optim_, lr_schedule, where)
        eval_loss, score = validate(network, valid_dl, objective, where)
        print(f"epoch {ep}  train {epoch_loss:.4f}  val {eval_loss:.4f}  acc {score:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_score:
            best_score = eval_loss
            best_idx = ep
            torch.save({"model": network.state_dict(), "optimizer": optim_.state_dict(), "epoch": ep}, ckpt_path)
    if best_idx is not None:
        network.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return network


def synth_data(count: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    centers = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * N_CLASSES, (count,), generator=gen)
    features = centers[group] + torch.randn(count, DIM, generator=gen)
    return 100 + 25 * features, group % N_CLASSES


class TwoPathMLP(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        for block in self.blocks:
            z = z + block(z)
            z = z * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(z)))


if __name__ == "__main__":
    entry()
