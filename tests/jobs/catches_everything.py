"""A trainer that guards each step with `except Exception` (and retries): a prefix run still stops it."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(128, 4)
y = (x.sum(1) > 0).long()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
while True:
    try:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    except Exception as exc:  # noqa: BLE001 - a trainer that keeps going whatever happens
        print("retrying after", exc)
