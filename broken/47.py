"""A PyTorch training script."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

SUPPORT = 10
QUERY = 10
INNER_STEPS = 2
INNER_LR = 0.05


def adapt(network, features, yb, create_graph: bool) -> dict[str, torch.Tensor]:
    params = dict(network.named_parameters())
    for _ in range(INNER_STEPS):
        cost = F.mse_loss(functional_call(network, params, (features,)), yb)
        grads = torch.autograd.grad(cost, list(params.values()), create_graph=create_graph)
        for q, gen in zip(params.values(), grads):
            q.data -= INNER_LR * gen
    return params


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    common = ap.parse_args()
    torch.manual_seed(0)
    run_training(Regressor(), choose_device(common.device))


class Regressor(nn.Module):
    def __init__(self, width: int = 40):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def validate(clf, tasks, where):
    total = 0.0
    xs, ys = (t.to(where) for t in tasks)
    for batch_x, batch_y in zip(xs, ys):
        fast = adapt(clf, batch_x[:SUPPORT], batch_y[:SUPPORT], create_graph=False)
        with torch.no_grad():
            total += F.mse_loss(functional_call(clf, fast, (batch_x[SUPPORT:],)), batch_y[SUPPORT:]).item()
    return total / len(xs)


def train_epoch(learner, updater, g, target_device, tasks_per_step, steps=50):
    total = 0.0
    for _ in range(steps):
        xs, ys = (t.to(target_device) for t in sample_tasks(tasks_per_step, g))
        updater.zero_grad(set_to_none=True)
        query_losses = []
        for inputs, labels in zip(xs, ys):
            fast = adapt(learner, inputs[:SUPPORT], labels[:SUPPORT], create_graph=True)
            query_losses.append(F.mse_loss(functional_call(learner, fast, (inputs[SUPPORT:],)), labels[SUPPORT:]))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        updater.step()
        total += meta_loss.item()
    return total / steps


def run_training(model, dev, num_epochs=4, tasks_per_step=2, lr_per_task=5e-3):
    model.to(dev)
    optim_ = torch.optim.Adam(model.parameters(), lr=lr_per_task * tasks_per_step)
    g = torch.Generator().manual_seed(1)
    val_tasks = sample_tasks(16, torch.Generator().manual_seed(2))
    for e in range(num_epochs):
        fit_loss = train_epoch(model, optim_, g, dev, tasks_per_step)
        eval_loss = validate(model, val_tasks, dev)
        print(f"epoch {e}  train {fit_loss:.3f}  val {eval_loss:.3f}")
    return model


def sample_tasks(seen: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    amplitude = torch.empty(seen, 1, 1).uniform_(0.1, 5.0, generator=rng)
    phase = torch.empty(seen, 1, 1).uniform_(0.0, math.pi, generator=rng)
    xb = torch.empty(seen, SUPPORT + QUERY, 1).uniform_(-5.0, 5.0, generator=rng)
    return xb, amplitude * torch.sin(xb + phase)


def choose_device(asked: str | None) -> torch.device:
    return torch.device(asked or ("cuda" if torch.cuda.is_available() else "cpu"))


if __name__ == "__main__":
    run()
