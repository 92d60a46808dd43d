"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
D_IN = 16


def cli_main() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    training_set = NoisyPoints(*synth_data(1024, s=1), jitter=0.3)
    val_data = NoisyPoints(*synth_data(512, s=2))
    training_data = DataLoader(training_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0))
    val_batches = DataLoader(val_data, batch_size=128)
    train_model(Net(), training_data, val_batches, device)


def get_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def worker_init(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


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


class Net(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
        self.deep = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, width))
        self.shortcut = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        hidden = torch.relu(self.deep(hidden) + self.shortcut(hidden))
        return self.head(self.drop(hidden))


def synth_data(total: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * CLASSES, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * CLASSES, (total,), generator=gen)
    xb = anchors[blob] + torch.randn(total, D_IN, generator=gen)
    return xb, blob % CLASSES


def train_model(network, train_batches, valid_dl, target_device, num_epochs=4, base_lr=1e-2, best_path="best.pt"):
    network.to(target_device)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    opt = torch.optim.AdamW(network.parameters(), lr=base_lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=base_lr, total_steps=num_epochs * len(train_batches))
    lowest_val = math.inf
    best_ep = None
    for e in range(num_epochs):
        tr_loss = fit_epoch(network, train_batches, loss_function, opt, schedule, target_device)
        holdout_loss, score = eval_model(network, valid_dl, loss_function, target_device)
        print(f"epoch {e}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_ep = e
            torch.save({"model": network.state_dict(), "optimizer": opt.state_dict(), "epoch": e}, best_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(best_path, weights_only=True)["model"])
    return network


def fit_epoch(learner, batches, loss_fn, updater, sched, dev, grad_clip=0.1):
    cum_loss = 0.0
    n_examples = 0
    for inputs, yb in batches:
        inputs, yb = inputs.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
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


@torch.no_grad()
def eval_model(net, batch_iter, objective, where):
    net.eval()
    loss_sum = 0.0
    hits = 0
    seen = 0
    for batch_x, targets in batch_iter:
        batch_x = batch_x.to(where)
        targets = targets.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            preds = net(batch_x)
        loss_sum += objective(preds.float(), targets).item() * len(targets)
        hits += (preds.argmax(1) == targets).sum().item()
        seen += len(targets)
    return loss_sum / seen, hits / seen


if __name__ == "__main__":
    cli_main()
