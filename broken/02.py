"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
DIM = 16


def worker_init(wid: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


def choose_device(asked: str | None) -> torch.device:
    label = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def train_model(net, train_batches, valid_dl, dev, num_epochs=4, peak_lr=1e-2, save_path="best.pt"):
    net.to(dev)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    optim_ = torch.optim.AdamW(net.parameters(), lr=peak_lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=peak_lr, total_steps=num_epochs * len(train_batches))
    best_score = math.inf
    best_ep = None
    for e in range(num_epochs):
        fit_loss = train_epoch(net, train_batches, loss_fn, optim_, schedule, dev)
        eval_loss, val_acc = validate(net, valid_dl, loss_fn, dev)
        print(f"epoch {e}  train {fit_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  lr {schedule.get_last_lr()[0]:.2e}")
        if eval_loss < best_score:
            best_score = eval_loss
            best_ep = e
            torch.save({"model": net.state_dict(), "optimizer": optim_.state_dict(), "epoch": e}, save_path)
    if best_ep is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


def sample_points(count: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    component = torch.randint(0, 2 * N_CLASSES, (count,), generator=gen)
    inputs = anchors[component] + torch.randn(count, DIM, generator=gen)
    return inputs, component % N_CLASSES


def train_epoch(clf, batch_iter, objective, updater, sched, target_device, grad_clip=0.1):
    clf.train()
    cum_loss = 0.0
    n_examples = 0
    for xb, batch_y in batch_iter:
        xb = xb.to(target_device, non_blocking=True)
        batch_y = batch_y.to(target_device, non_blocking=True)
        updater.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            scores = clf(xb)
        err = objective(scores.float(), batch_y)
        err.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), grad_clip)
        updater.step()
        sched.step()
        cum_loss += err * len(batch_y)
        n_examples += len(batch_y)
    return cum_loss / n_examples


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


@torch.no_grad()
def validate(learner, batches, loss_function, where):
    learner.eval()
    running_loss = 0.0
    hits = 0
    seen = 0
    for features, labels in batches:
        features = features.to(where)
        labels = labels.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            logits = learner(features)
        running_loss += loss_function(logits.float(), labels).item() * len(labels)
        hits += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    return running_loss / seen, hits / seen


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_ds = NoisyPoints(*sample_points(1024, s=1), jitter=0.3)
    valid_set = NoisyPoints(*sample_points(512, s=2))
    training_data = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0))
    holdout = DataLoader(valid_set, batch_size=128)
    train_model(BranchNet(), training_data, holdout, device)


class BranchNet(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.deep = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(0.2), nn.Linear(width, width))
        self.shortcut = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.stem(x)
        z = torch.relu(self.deep(z) + self.shortcut(z))
        return self.head(self.drop(z))


if __name__ == "__main__":
    entry()
