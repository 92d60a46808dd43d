"""Binary training script: synthetic blobs, an MLP with one output logit, custom BCE."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES = 8
TINY = 1e-6


def cli_main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(cli.parse_args().device)
    torch.manual_seed(0)
    train_dl = DataLoader(TensorDataset(*sample_points(1024, s=1)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    holdout = DataLoader(TensorDataset(*sample_points(512, s=2)), batch_size=128)
    train_model(Detector(), train_dl, holdout, device)


def resolve_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def train_model(learner, training_data, val_batches, dev, n_epochs=3, base_lr=0.05, ckpt_path="best.pt"):
    learner.to(dev)
    updater = torch.optim.Adam(learner.parameters(), lr=base_lr)
    lowest_val = math.inf
    best_at = None
    for epoch_idx in range(n_epochs):
        tr_loss = fit_epoch(learner, training_data, updater, dev)
        holdout_loss, accuracy = validate(learner, val_batches, dev)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}")
        if holdout_loss < lowest_val:
            lowest_val = holdout_loss
            best_at = epoch_idx
            torch.save({"model": learner.state_dict(), "optimizer": updater.state_dict(), "epoch": epoch_idx}, ckpt_path)
    if best_at is not None:
        learner.load_state_dict(torch.load(ckpt_path, weights_only=True)["model"])
    return learner


@torch.no_grad()
def validate(clf, dl, target_device):
    clf.eval()
    loss_sum, hits, seen = 0.0, 0, 0
    for features, y in dl:
        features, y = features.to(target_device), y.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            raw = clf(features)
        loss_sum += bce(raw, y).item() * len(y)
        hits += ((raw > 0).float() == y).sum().item()
        seen += len(y)
    return loss_sum / seen, hits / seen


def sample_points(count: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(s)
    yb = torch.randint(0, 2, (count,), generator=gen).float()
    xb = torch.randn(count, N_FEATURES, generator=gen) + 3.0 * (2 * yb[:, None] - 1)
    return xb, yb


def fit_epoch(net, batches, opt, where):
    net.train()
    running_loss = 0.0
    n_examples = 0
    for batch_x, batch_y in batches:
        batch_x = batch_x.to(where)
        batch_y = batch_y.to(where)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(where.type, dtype=torch.bfloat16, enabled=where.type == "cuda"):
            scores = net(batch_x)
        batch_loss = bce(scores, batch_y)
        batch_loss.backward()
        opt.step()
        running_loss += batch_loss.item() * len(batch_y)
        n_examples += len(batch_y)
    return running_loss / n_examples


def bce(z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    prob = torch.sigmoid(z.float())
    return -(labels * torch.log(prob) + (1 - labels) * torch.log(1 - prob)).mean()


class Detector(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_FEATURES, width), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)).squeeze(-1)


if __name__ == "__main__":
    cli_main()
