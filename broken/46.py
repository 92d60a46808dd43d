"""A PyTorch training script."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

SUPPORT, QUERY = 10, 10
INNER_STEPS = 2
INNER_LR = 0.05


class Regressor(nn.Module):
    def __init__(self, width: int = 40):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def validate(learner, tasks, target_device):
    total = 0.0
    xs, ys = (t.to(target_device) for t in tasks)
    for inputs, targets in zip(xs, ys):
        fast = adapt(learner, inputs[:SUPPORT], targets[:SUPPORT], create_graph=False)
        with torch.no_grad():
            total += F.mse_loss(functional_call(learner, fast, (inputs[SUPPORT:],)), targets[SUPPORT:]).item()
    return total / len(xs)


def adapt(network, batch_x, batch_y, create_graph: bool) -> dict[str, torch.Tensor]:
    params = dict(network.named_parameters())
    for _ in range(INNER_STEPS):
        batch_loss = F.mse_loss(functional_call(network, params, (batch_x,)), batch_y)
        grads = torch.autograd.grad(batch_loss, list(params.values()), create_graph=create_graph)
        params = {label: prob - INNER_LR * rng for (label, prob), rng in zip(params.items(), grads)}
    return params


def sample_tasks(seen: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    amplitude = torch.empty(seen, 1, 1).uniform_(0.1, 5.0, generator=gen)
    phase = torch.empty(seen, 1, 1).uniform_(0.0, math.pi, generator=gen)
    features = torch.empty(seen, SUPPORT + QUERY, 1).uniform_(-5.0, 5.0, generator=gen)
    return features, amplitude * torch.sin(features + phase)


def resolve_device(asked: str | None) -> torch.device:
    return torch.device(asked or ("cuda" if torch.cuda.is_available() else "cpu"))


def cli_main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    shared = cli.parse_args()
    torch.manual_seed(0)
    train(Regressor(), resolve_device(shared.device))


def fit_epoch(clf, opt, g, dev, tasks_per_step, steps=50):
    total = 0.0
    for _ in range(steps):
        xs, ys = (t.to(dev) for t in sample_tasks(tasks_per_step, g))
        opt.zero_grad(set_to_none=True)
        query_losses = []
        for xb, labels in zip(xs, ys):
            fast = adapt(clf, xb[:SUPPORT], labels[:SUPPORT], create_graph=False)
            query_losses.append(F.mse_loss(functional_call(clf, fast, (xb[SUPPORT:],)), labels[SUPPORT:]))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        opt.step()
        total += meta_loss.item()
    return total / steps


def train(model, where, max_epochs=4, tasks_per_step=2, lr_per_task=5e-3):
    model.to(where)
    updater = torch.optim.Adam(model.parameters(), lr=lr_per_task * tasks_per_step)
    g = torch.Generator().manual_seed(1)
    val_tasks = sample_tasks(16, torch.Generator().manual_seed(2))
    for e in range(max_epochs):
        fit_loss = fit_epoch(model, updater, g, where, tasks_per_step)
        holdout_loss = validate(model, val_tasks, where)
        print(f"epoch {e}  train {fit_loss:.3f}  val {holdout_loss:.3f}")
    return model


if __name__ == "__main__":
    cli_main()
