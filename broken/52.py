"""Binary training script: synthetic blobs, an MLP with one output logit, custom BCE."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8
EPSILON = 1e-6


def fit_epoch(learner, batches, optim_, where):
    learner.train()
    running_loss, seen = 0.0, 0
    for inputs, batch_y in batches:
        inputs = inputs.to(where)
        batch_y = batch_y.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            z = learner(inputs)
        cost = bce(z, batch_y)
        cost.backward()
        optim_.zero_grad(set_to_none=True)
        optim_.step()
        running_loss += cost.item() * len(batch_y)
        seen += len(batch_y)
    return running_loss / seen


def resolve_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def run_training(network, train_dl, val_batches, dev, max_epochs=3, learning_rate=0.05, save_path="best.pt"):
    network.to(dev)
    updater = torch.optim.Adam(network.parameters(), lr=learning_rate)
    best_loss = math.inf
    best_ep = None
    for epoch_idx in range(max_epochs):
        epoch_loss = fit_epoch(network, train_dl, updater, dev)
        holdout_loss, val_acc = validate(network, val_batches, dev)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}")
        if holdout_loss < best_loss:
            best_loss = holdout_loss
            best_ep = epoch_idx
            torch.save({"model": network.state_dict(), "optimizer": updater.state_dict(), "epoch": epoch_idx}, save_path)
    if best_ep is not None:
        network.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return network


class BinaryNet(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_FEATURES, width), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)).squeeze(-1)


def bce(scores: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    probs = torch.sigmoid(scores.float()).clamp(EPSILON, 1 - EPSILON)
    return -(y_true * torch.log(probs) + (1 - y_true) * torch.log(1 - probs)).mean()


@torch.no_grad()
def validate(clf, batch_iter, target_device):
    clf.eval()
    cum_loss = 0.0
    n_correct = 0
    count = 0
    for xb, yb in batch_iter:
        xb, yb = xb.to(target_device), yb.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            raw = clf(xb)
        cum_loss += bce(raw, yb).item() * len(yb)
        n_correct += ((raw > 0).float() == yb).sum().item()
        count += len(yb)
    return cum_loss / count, n_correct / count


def make_dataset(total: int, random_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    labels = torch.randint(0, 2, (total,), generator=gen).float()
    batch_x = torch.randn(total, N_FEATURES, generator=gen) + 3.0 * (2 * labels[:, None] - 1)
    return batch_x, labels


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    training_data = DataLoader(TensorDataset(*make_dataset(1024, random_seed=1)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_dl = DataLoader(TensorDataset(*make_dataset(512, random_seed=2)), batch_size=128)
    run_training(BinaryNet(), training_data, valid_dl, device)


if __name__ == "__main__":
    entry()
