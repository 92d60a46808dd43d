"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
N_FEATURES = 16


def run_training(net, training_data, valid_dl, where, n_epochs=4, base_lr=1e-2, save_path="best.pt"):
    net.to(where)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=base_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=base_lr, total_steps=n_epochs * len(training_data))
    lowest_val, best_idx = math.inf, None
    for epoch_idx in range(n_epochs):
        tr_loss = run_epoch(net, training_data, objective, optim_, schedule, where)
        holdout_loss, val_acc = validate(net, valid_dl, objective, where)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_idx = epoch_idx
            torch.save({"model": net.state_dict(), "optimizer": optim_.state_dict(), "epoch": epoch_idx}, save_path)
    if best_idx is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


@torch.no_grad()
def validate(network, batches, loss_function, target_device):
    network.eval()
    running_loss, right, count = 0.0, 0, 0
    for batch_x, labels in batches:
        batch_x, labels = batch_x.to(target_device), labels.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = network(batch_x)
        running_loss += loss_function(logits.float(), labels).item() * len(labels)
        right += (logits.argmax(1) == labels).sum().item()
        count += len(labels)
    return running_loss / count, right / count


def synth_data(total: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    centers = torch.randn(2 * CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * CLASSES, (total,), generator=gen)
    xb = centers[blob] + torch.randn(total, N_FEATURES, generator=gen)
    return 100 + 25 * xb, blob % CLASSES


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
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


def run_epoch(learner, dl, loss_fn, updater, lr_schedule, dev, grad_clip=0.1):
    learner.train()
    loss_sum = 0.0
    seen = 0
    for inputs, targets in dl:
        inputs = inputs.to(dev, non_blocking=True)
        targets = targets.to(dev, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            preds = learner(inputs)
        err = loss_fn(preds.float(), targets)
        err.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), grad_clip)
        updater.step()
        lr_schedule.step()
        loss_sum += err.item() * len(targets)
        seen += len(targets)
    return loss_sum / seen


def resolve_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def worker_init(worker: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, yb = synth_data(1024, rng_seed=1)
    mean, std = x.mean(0), x.std(0)
    training_set = NoisyPoints((x - mean) / std, yb, jitter=0.3)
    val_x, val_y = synth_data(500, rng_seed=2)
    val_data = NoisyPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0))
    val_batches = DataLoader(val_data, batch_size=128)
    run_training(Net(), train_batches, val_batches, device)


if __name__ == "__main__":
    run()
