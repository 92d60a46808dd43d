"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
N_FEATURES = 16


def fit_epoch(net, batches, loss_fn, updater, lr_schedule, dev, clip=0.1):
    net.train()
    loss_sum, seen = 0.0, 0
    for xb, targets in batches:
        xb = xb.to(dev, non_blocking=True)
        targets = targets.to(dev, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores = net(xb)
        batch_loss = loss_fn(scores.float(), targets)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        updater.step()
        lr_schedule.step()
        loss_sum += batch_loss.item() * len(targets)
        seen += len(targets)
    return loss_sum / seen


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = synth_data(1024, rng_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    training_set = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = synth_data(500, rng_seed=2)
    val_data = NoisyPoints((val_x - mean) / std, val_y)
    training_data = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    train_model(Net(), training_data, holdout, device)


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


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats).detach()
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


def train_model(network, train_batches, val_batches, where, num_epochs=4, peak_lr=1e-2, best_path="best.pt"):
    network.to(where)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in network.parameters() if prob.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=peak_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=peak_lr, total_steps=num_epochs * len(train_batches))
    best_loss = math.inf
    best_ep = None
    for epoch_idx in range(num_epochs):
        fit_loss = fit_epoch(network, train_batches, loss_function, optim_, schedule, where)
        holdout_loss, score = validate(network, val_batches, loss_function, where)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < best_loss:
            best_loss = holdout_loss
            best_ep = epoch_idx
            torch.save({"model": network.state_dict(), "optimizer": optim_.state_dict(), "epoch": epoch_idx}, best_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return network


def choose_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


@torch.no_grad()
def validate(clf, batch_iter, objective, target_device):
    clf.train(False)
    cum_loss = 0.0
    n_correct = 0
    total = 0
    for inputs, labels in batch_iter:
        inputs = inputs.to(target_device)
        labels = labels.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = clf(inputs)
        cum_loss += objective(logits.float(), labels).item() * len(labels)
        n_correct += (logits.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, n_correct / total


def reseed_worker(worker: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


def synth_data(count: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    anchors = torch.randn(2 * K, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * K, (count,), generator=gen)
    features = anchors[blob] + torch.randn(count, N_FEATURES, generator=gen)
    return 100 + 25 * features, blob % K


if __name__ == "__main__":
    run()
