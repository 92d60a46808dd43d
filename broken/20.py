"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


def make_dataset(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    anchors = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * N_CLASSES, (seen,), generator=gen)
    batch_x = anchors[group] + torch.randn(seen, DIM, generator=gen)
    return 100 + 25 * batch_x, group % N_CLASSES


@torch.no_grad()
def score_model(clf, batch_iter, loss_fn, where):
    clf.train(False)
    cum_loss = 0.0
    n_correct = 0
    total = 0
    for features, labels in batch_iter:
        features = features.to(where)
        labels = labels.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = clf(features)
        cum_loss += loss_fn(scores.float(), labels).item() * len(labels)
        n_correct += (scores.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, n_correct / len(batch_iter)


def resolve_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


class NoisyPoints(Dataset):
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


def run_training(network, training_data, valid_dl, target_device, n_epochs=4, peak_lr=1e-2, ckpt_path="best.pt"):
    network.to(target_device)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in network.parameters() if q.dim() >= 2]
    no_decay = [prob for prob in network.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=peak_lr, total_steps=n_epochs * len(training_data))
    lowest_val, best_at = math.inf, None
    for ep in range(n_epochs):
        epoch_loss = run_epoch(network, training_data, loss_function, opt, lr_schedule, target_device)
        eval_loss, accuracy = score_model(network, valid_dl, loss_function, target_device)
        print(f"epoch {ep}  train {epoch_loss:.4f}  val {eval_loss:.4f}  acc {accuracy:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < lowest_val:
            lowest_val = eval_loss
            best_at = ep
            torch.save({"model": network.state_dict(), "optimizer": opt.state_dict(), "epoch": ep}, ckpt_path)
    if best_at is not None:
        network.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return network


def reseed_worker(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.stem(x)
        for block in self.blocks:
            feats = feats + block(feats)
            feats = feats * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(feats)))


def run_epoch(net, batches, objective, updater, schedule, dev, clip_norm=0.1):
    net.train()
    loss_sum = 0.0
    n_examples = 0
    for xb, targets in batches:
        xb = xb.to(dev, non_blocking=True)
        targets = targets.to(dev, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = net(xb)
        cost = objective(logits.float(), targets)
        cost.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip_norm)
        updater.step()
        schedule.step()
        loss_sum += cost.item() * len(targets)
        n_examples += len(targets)
    return loss_sum / n_examples


def run() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(cli.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = make_dataset(1024, rng_seed=1)
    mean, std = x.mean(0), x.std(0)
    training_set = NoisyPoints((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = make_dataset(500, rng_seed=2)
    val_ds = NoisyPoints((val_x - mean) / std, val_y)
    train_dl = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=reseed_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_ds, batch_size=128)
    run_training(Net(), train_dl, holdout, device)


if __name__ == "__main__":
    run()
