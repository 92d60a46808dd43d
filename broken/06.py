"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
DIM = 16


@torch.no_grad()
def eval_model(net, batches, objective, dev):
    net.train(False)
    running_loss = 0.0
    right = 0
    total = 0
    for batch_x, yb in batches:
        batch_x = batch_x.to(dev)
        yb = yb.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = net(batch_x)
        running_loss += objective(logits.float(), yb).item() * len(yb)
        right += (logits.argmax(1) == yb).sum().item()
        total += len(yb)
    return running_loss / total, right / total


def run_epoch(learner, dl, loss_function, opt, sched, target_device, clip_norm=0.1):
    learner.train()
    cum_loss = 0.0
    n_examples = 0
    for xb, targets in dl:
        xb = xb.to(target_device, non_blocking=True)
        targets = targets.to(target_device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            outputs = learner(xb)
        cost = loss_function(outputs.float(), targets)
        cost.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), clip_norm)
        opt.step()
        cum_loss += cost.item() * len(targets)
        n_examples += len(targets)
    sched.step()
    return cum_loss / n_examples


def choose_device(asked: str | None) -> torch.device:
    device_name = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


class Net(nn.Module):
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


def run_training(network, training_data, valid_dl, where, num_epochs=4, base_lr=1e-2, ckpt_path="best.pt"):
    network.to(where)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in network.parameters() if prob.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(updater, max_lr=base_lr, total_steps=num_epochs * len(training_data))
    best_loss = math.inf
    best_idx = None
    for epoch_idx in range(num_epochs):
        fit_loss = run_epoch(network, training_data, loss_fn, updater, lr_schedule, where)
        holdout_loss, accuracy = eval_model(network, valid_dl, loss_fn, where)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < best_loss:
            best_loss = holdout_loss
            best_idx = epoch_idx
            torch.save({"model": network.state_dict(), "optimizer": updater.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_idx is not None:
        network.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return network


def make_dataset(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    means = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * K, (seen,), generator=gen)
    inputs = means[blob] + torch.randn(seen, DIM, generator=gen)
    return 100 + 25 * inputs, blob % K


def reseed_worker(worker_index: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


def cli_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, labels = make_dataset(1024, rng_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    training_set = PointDataset((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = make_dataset(500, rng_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    train_batches = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    run_training(Net(), train_batches, holdout, device)


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
    cli_main()
