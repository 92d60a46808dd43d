"""Train a binary classifier on two synthetic blobs with a hand-written cross-entropy."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8
SMALL = 1e-6


def train_model(net, train_dl, val_batches, target_device, n_epochs=3, base_lr=0.05, save_path="best.pt"):
    net.to(target_device)
    optim_ = torch.optim.Adam(net.parameters(), lr=base_lr)
    lowest_val = math.inf
    best_at = None
    for ep in range(n_epochs):
        tr_loss = run_epoch(net, train_dl, optim_, target_device)
        eval_loss, accuracy = validate(net, val_batches, target_device)
        print(f"epoch {ep}  train {tr_loss:.4f}  val {eval_loss:.4f}  acc {accuracy:.3f}")
        if eval_loss < lowest_val:
            lowest_val = eval_loss
            best_at = ep
            torch.save({"model": net.state_dict(), "optimizer": optim_.state_dict(), "epoch": ep}, save_path)
    if best_at is not None:
        net.load_state_dict(torch.load(save_path, weights_only=True)["model"])
    return net


def binary_loss(raw: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    prob = torch.sigmoid(raw.float()).clamp(SMALL, 1 - SMALL)
    return -(labels * torch.log(prob) + (1 - labels) * torch.log(1 - prob)).mean()


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_batches = DataLoader(TensorDataset(*synth_data(1024, rng_seed=1)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    valid_dl = DataLoader(TensorDataset(*synth_data(512, rng_seed=2)), batch_size=128)
    train_model(BinaryNet(), train_batches, valid_dl, device)


def run_epoch(clf, batches, opt, dev):
    clf.train()
    loss_sum, count = 0.0, 0
    for batch_x, yb in batches:
        batch_x = batch_x.to(dev)
        yb = yb.to(dev)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores = clf(batch_x)
        batch_loss = binary_loss(scores, yb)
        batch_loss.backward()
        opt.step()
        loss_sum += batch_loss.item() * len(yb)
        count += len(yb)
    return loss_sum / count


def resolve_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class BinaryNet(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_FEATURES, width), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def synth_data(seen: int, rng_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = torch.Generator().manual_seed(rng_seed)
    batch_y = torch.randint(0, 2, (seen,), generator=rng).float()
    inputs = torch.randn(seen, N_FEATURES, generator=rng) + 3.0 * (2 * batch_y[:, None] - 1)
    return inputs, batch_y


@torch.no_grad()
def validate(network, dl, where):
    network.eval()
    running_loss = 0.0
    n_correct = 0
    total = 0
    for xb, y in dl:
        xb, y = xb.to(where), y.to(where)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            z = network(xb)
        running_loss += binary_loss(z, y).item() * len(y)
        n_correct += ((z > 0).float() == y).sum().item()
        total += len(y)
    return running_loss / total, n_correct / total


if __name__ == "__main__":
    entry()
