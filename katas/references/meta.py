"""A correct PyTorch training script: MAML on sine-wave regression.

Every task is a sine wave with its own amplitude and phase. The model adapts to a
task with a few gradient steps on a handful of support points (fast weights, never
written into the model), and the meta-parameters are trained so that this adaptation
fits the task's query points. The inner gradients are taken with create_graph=True:
the meta-gradient differentiates through the inner steps (second-order MAML).
Run it with `python reference/meta.py [--device cuda]`.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

SUPPORT, QUERY = 10, 10  # points per task to adapt on, and to judge the adaptation on
INNER_STEPS, INNER_LR = 2, 0.05


def sample_tasks(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n sine waves y = a sin(x + phase), each sampled at SUPPORT + QUERY points: x, y of shape (n, points, 1)."""
    amplitude = torch.empty(n, 1, 1).uniform_(0.1, 5.0, generator=g)
    phase = torch.empty(n, 1, 1).uniform_(0.0, math.pi, generator=g)
    x = torch.empty(n, SUPPORT + QUERY, 1).uniform_(-5.0, 5.0, generator=g)
    return x, amplitude * torch.sin(x + phase)


class Regressor(nn.Module):
    def __init__(self, width: int = 40):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def adapt(model, x, y, create_graph: bool) -> dict[str, torch.Tensor]:
    """Fast weights after INNER_STEPS of gradient descent on (x, y), starting from the model's own parameters."""
    params = dict(model.named_parameters())
    for _ in range(INNER_STEPS):
        loss = F.mse_loss(functional_call(model, params, (x,)), y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
        params = {name: p - INNER_LR * g for (name, p), g in zip(params.items(), grads)}
    return params


def train_one_epoch(model, optimizer, g, device, tasks_per_step, steps=50):
    total = 0.0
    for _ in range(steps):
        xs, ys = (t.to(device) for t in sample_tasks(tasks_per_step, g))
        optimizer.zero_grad(set_to_none=True)
        query_losses = []
        for x, y in zip(xs, ys):
            fast = adapt(model, x[:SUPPORT], y[:SUPPORT], create_graph=True)
            query_losses.append(F.mse_loss(functional_call(model, fast, (x[SUPPORT:],)), y[SUPPORT:]))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        optimizer.step()
        total += meta_loss.item()
    return total / steps


def evaluate(model, tasks, device):
    """Mean query loss over held-out tasks: adapting needs gradients, judging the adapted model does not (the model
    has no dropout or batch norm: no train or eval mode to switch)."""
    total = 0.0
    xs, ys = (t.to(device) for t in tasks)
    for x, y in zip(xs, ys):
        fast = adapt(model, x[:SUPPORT], y[:SUPPORT], create_graph=False)
        with torch.no_grad():
            total += F.mse_loss(functional_call(model, fast, (x[SUPPORT:],)), y[SUPPORT:]).item()
    return total / len(xs)


def fit(model, device, epochs=4, tasks_per_step=2, lr_per_task=5e-3):
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr_per_task * tasks_per_step)  # a meta-batch's rate
    g = torch.Generator().manual_seed(1)
    val_tasks = sample_tasks(16, torch.Generator().manual_seed(2))
    for epoch in range(epochs):
        train_loss = train_one_epoch(model, optimizer, g, device, tasks_per_step)
        val_loss = evaluate(model, val_tasks, device)
        print(f"epoch {epoch}  train {train_loss:.3f}  val {val_loss:.3f}")
    return model


def pick_device(requested: str | None) -> torch.device:
    return torch.device(requested or ("cuda" if torch.cuda.is_available() else "cpu"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    args = parser.parse_args()
    torch.manual_seed(0)
    fit(Regressor(), pick_device(args.device))


if __name__ == "__main__":
    main()
