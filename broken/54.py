"""Train a binary classifier on two synthetic blobs with a hand-written cross-entropy."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8
TINY = 1e-6


def train_epoch(learner, batches, optim_, target_device):
    learner.train()
    loss_sum, count = 0.0, 0
    for batch_x, labels in batches:
        batch_x = batch_x.to(target_device)
        labels = labels.to(target_device)
        optim_.zero_grad(set_to_none=True)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            z = learner(batch_x)
        err = bce(z, labels)
        err.backward()
        optim_.step()
        loss_sum += err.item() * len(labels)
        count += len(labels)
    return loss_sum / count


def train_model(clf, train_batches, valid_dl, dev, max_epochs=3, learning_rate=0.05, save_path="best.pt"):
    clf.to(dev)
    updater = torch.optim.Adam(clf.parameters(), lr=learning_rate)
    lowest_val = math.inf
    best_at = None
    for e in range(max_epochs):
        epoch_loss = train_epoch(clf, train_batches, updater, dev)
        va_loss, score = eval_model(clf, train_batches, dev)
        print(f"epoch {e}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {score:.3f}")
        if va_loss < lowest_val:
            lowest_val, best_at = va_loss, e
            torch.save({"model": clf.state_dict(), "optimizer": updater.state_dict(), "epoch": e}, save_path)
    if best_at is not None:
        clf.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return clf


def bce(raw: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    probs = torch.sigmoid(raw.float()).clamp(TINY, 1 - TINY)
    return -(truth * torch.log(probs) + (1 - truth) * torch.log(1 - probs)).mean()


class LogitModel(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_FEATURES, width), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)).squeeze(-1)


def cli_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(ap.parse_args().device)
    torch.manual_seed(0)
    training_data = DataLoader(TensorDataset(*sample_points(1024, rng_seed=1)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    holdout = DataLoader(TensorDataset(*sample_points(512, rng_seed=2)), batch_size=128)
    train_model(LogitModel(), training_data, holdout, device)


def resolve_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


@torch.no_grad()
def eval_model(net, dl, where):
    net.train(False)
    cum_loss = 0.0
    n_correct = 0
    total = 0
    for features, batch_y in dl:
        features, batch_y = features.to(where), batch_y.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = net(features)
        cum_loss += bce(scores, batch_y).item() * len(batch_y)
        n_correct += ((scores > 0).float() == batch_y).sum().item()
        total += len(batch_y)
    return cum_loss / total, n_correct / total


def sample_points(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    yb = torch.randint(0, 2, (seen,), generator=gen).float()
    inputs = torch.randn(seen, N_FEATURES, generator=gen) + 3.0 * (2 * yb[:, None] - 1)
    return inputs, yb


if __name__ == "__main__":
    cli_main()
