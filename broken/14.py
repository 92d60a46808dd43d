"""Multi-class training script: synthetic data, an MLP with a shortcut branch, a one-cycle schedule."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

K = 4
DIM = 16


class PointDataset(Dataset):
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


def init_worker(worker: int) -> None:
    winfo = get_worker_info()
    winfo.dataset.rng.manual_seed(winfo.seed)


def make_dataset(count: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    anchors = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * K, (count,), generator=gen)
    xb = anchors[group] + torch.randn(count, DIM, generator=gen)
    return 100 + 25 * xb, group % K


def run_training(clf, train_dl, valid_dl, dev, num_epochs=4, peak_lr=1e-2, ckpt_path="best.pt"):
    clf.to(dev)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in clf.parameters() if q.dim() >= 2]
    no_decay = [prob for prob in clf.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=peak_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(optim_, max_lr=peak_lr, total_steps=num_epochs * len(train_dl))
    best_score = math.inf
    best_at = None
    for epoch_idx in range(num_epochs):
        fit_loss = train_epoch(clf, train_dl, loss_function, optim_, sched, dev)
        holdout_loss, val_acc = eval_model(clf, valid_dl, loss_function, dev)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if holdout_loss < best_score:
            best_score, best_at = holdout_loss, epoch_idx
            torch.save({"model": clf.state_dict(), "optimizer": optim_.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_at is not None:
        clf.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return clf


@torch.no_grad()
def eval_model(net, batch_iter, loss_fn, target_device):
    net.train(False)
    running_loss = 0.0
    n_correct = 0
    total = 0
    for features, yb in batch_iter:
        features = features.to(target_device)
        yb = yb.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            preds = net(features)
        running_loss += loss_fn(preds.float(), yb).item() * len(yb)
        n_correct += (preds.argmax(1) == yb).sum().item()
        total += len(yb)
    return running_loss / total, n_correct / total


def train_epoch(network, batches, objective, opt, schedule, where, clip=0.1):
    network.train()
    cum_loss = 0.0
    seen = 0
    for inputs, labels in batches:
        inputs = inputs.to(where, non_blocking=True)
        labels = labels.to(where, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = network(inputs)
        err = objective(scores.float(), labels)
        err.backward()
        nn.utils.clip_grad_norm_(network.parameters(), clip)
        opt.step()
        schedule.step()
        cum_loss += err.item() * len(labels)
        seen += len(labels)
    return cum_loss / seen


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, batch_y = make_dataset(1024, random_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_ds = PointDataset((x - mean) / std, batch_y, jitter=0.3)
    val_x, val_y = make_dataset(500, random_seed=2)
    val_data = PointDataset((val_x - mean) / std, val_y)
    training_data = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=init_worker, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    holdout = DataLoader(val_data, batch_size=128)
    run_training(BranchNet(), training_data, holdout, device)


def get_device(asked: str | None) -> torch.device:
    device_name = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(DIM, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = [nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                       for _ in range(depth)]
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        for block in self.blocks:
            hidden = hidden + block(hidden)
            hidden = hidden * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(hidden)))


if __name__ == "__main__":
    run()
