"""Train a small multi-class classifier on synthetic clustered data."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

CLASSES = 4
D_IN = 16


class BranchNet(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(D_IN, width), nn.BatchNorm1d(width), nn.ReLU())
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


def train_model(learner, train_batches, holdout, where, num_epochs=4, peak_lr=1e-2, ckpt_path="best.pt"):
    learner.to(where)
    loss_function = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [prob for prob in learner.parameters() if prob.dim() >= 2]
    no_decay = [q for q in learner.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=peak_lr, total_steps=num_epochs * len(train_batches))
    lowest_val, best_idx = math.inf, None
    for epoch_idx in range(num_epochs):
        fit_loss = run_epoch(learner, train_batches, loss_function, opt, sched, where)
        holdout_loss, val_acc = eval_model(learner, holdout, loss_function, where)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}  lr {sched.get_last_lr()[0]:.2e}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_idx = epoch_idx
            torch.save({"model": learner.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_idx is not None:
        learner.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return learner


def synth_data(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    means = torch.randn(2 * CLASSES, D_IN, generator=torch.Generator().manual_seed(0)) * 1.5
    blob = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    xb = means[blob] + torch.randn(seen, D_IN, generator=gen)
    return 100 + 25 * xb, blob % CLASSES


def run_epoch(clf, dl, loss_fn, optim_, schedule, target_device, grad_clip=0.1):
    clf.train()
    loss_sum = 0.0
    count = 0
    for inputs, batch_y in dl:
        inputs, batch_y = inputs.to(target_device, non_blocking=True), batch_y.to(target_device, non_blocking=True)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            preds = clf(inputs)
        cost = loss_fn(preds.float(), batch_y)
        cost.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), grad_clip)
        optim_.step()
        schedule.step()
        loss_sum += cost.item() * len(batch_y)
        count += len(batch_y)
    return loss_sum / count


@torch.no_grad()
def eval_model(net, batch_iter, objective, dev):
    net.train(False)
    cum_loss = 0.0
    hits = 0
    total = 0
    for features, yb in batch_iter:
        features = features.to(dev)
        yb = yb.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            outputs = net(features)
        cum_loss += objective(outputs.float(), yb).item() * len(yb)
        hits = (outputs.argmax(1) == yb).sum().item()
        total += len(yb)
    return cum_loss / total, hits / total


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    x, labels = synth_data(1024, rng_seed=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = AugmentedPoints((x - mean) / std, labels, jitter=0.3)
    val_x, val_y = synth_data(500, rng_seed=2)
    valid_set = AugmentedPoints((val_x - mean) / std, val_y)
    train_dl = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    val_batches = DataLoader(valid_set, batch_size=128)
    train_model(BranchNet(), train_dl, val_batches, device)


def worker_init(worker_index: int) -> None:
    wi = get_worker_info()
    wi.dataset.rng.manual_seed(wi.seed)


class AugmentedPoints(Dataset):
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


def choose_device(asked: str | None) -> torch.device:
    label = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


if __name__ == "__main__":
    entry()
