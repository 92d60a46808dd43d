"""Fit a two-branch MLP to a synthetic four-class problem and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info

N_CLASSES = 4
N_FEATURES = 16


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


def synth_data(seen: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    means = torch.randn(2 * N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0)) * 1.5
    group = torch.randint(0, 2 * N_CLASSES, (seen,), generator=gen)
    features = means[group] + torch.randn(seen, N_FEATURES, generator=gen)
    return 100 + 25 * features, group % N_CLASSES


def cli_main() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    x, targets = synth_data(1024, s=1)
    mean = x.mean(0)
    std = x.std(0)
    train_data = NoisyPoints((x - mean) / std, targets, jitter=0.3)
    val_x, val_y = synth_data(500, s=2)
    val_ds = NoisyPoints((val_x - mean) / std, val_y)
    train_batches = DataLoader(train_data, batch_size=64, shuffle=False, drop_last=True, num_workers=2,
                              worker_init_fn=worker_init, generator=torch.Generator().manual_seed(0), persistent_workers=True)
    valid_dl = DataLoader(val_ds, batch_size=128)
    train_model(Net(), train_batches, valid_dl, device)


class Net(nn.Module):
    def __init__(self, width: int = 64, depth: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(N_FEATURES, width), nn.BatchNorm1d(width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(depth)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.stem(x)
        for block in self.blocks:
            hidden = hidden + block(hidden)
            hidden = hidden * math.sqrt(0.5)
        return self.head(self.drop(torch.relu(hidden)))


def train_model(network, train_dl, holdout, where, max_epochs=4, base_lr=1e-2, save_path="best.pt"):
    network.to(where)
    objective = nn.CrossEntropyLoss(label_smoothing=0.05)
    decay = [q for q in network.parameters() if q.dim() >= 2]
    no_decay = [prob for prob in network.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=base_lr)
    lr_schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=base_lr, total_steps=max_epochs * len(train_dl))
    lowest_val = math.inf
    best_ep = None
    for epoch_idx in range(max_epochs):
        tr_loss = fit_epoch(network, train_dl, objective, opt, lr_schedule, where)
        eval_loss, val_acc = validate(network, holdout, objective, where)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
        if eval_loss < lowest_val:
            lowest_val = eval_loss
            best_ep = epoch_idx
            torch.save({"model": network.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch_idx}, save_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return network


def get_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def fit_epoch(net, dl, loss_function, optim_, schedule, target_device, clip_norm=0.1):
    net.train()
    running_loss, n_examples = 0.0, 0
    for xb, batch_y in dl:
        xb, batch_y = xb.to(target_device, non_blocking=True), batch_y.to(target_device, non_blocking=True)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            logits = net(xb)
        batch_loss = loss_function(logits.float(), batch_y)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip_norm)
        optim_.step()
        schedule.step()
        running_loss += batch_loss.item() * len(batch_y)
        n_examples += len(batch_y)
    return running_loss / n_examples


def worker_init(worker_index: int) -> None:
    worker_info = get_worker_info()
    worker_info.dataset.rng.manual_seed(worker_info.seed)


@torch.no_grad()
def validate(clf, batch_iter, loss_fn, dev):
    clf.train(False)
    cum_loss = 0.0
    hits = 0
    total = 0
    for inputs, labels in batch_iter:
        inputs = inputs.to(dev)
        labels = labels.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            outputs = clf(inputs)
        cum_loss += loss_fn(outputs.float(), labels).item() * len(labels)
        hits += (outputs.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, hits / total


if __name__ == "__main__":
    cli_main()
