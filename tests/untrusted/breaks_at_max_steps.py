"""A step budget: training stops in the middle of an epoch once max_steps updates were made (no schedule says
otherwise): an ending, judged on what ran."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 8)
y = (x[:, 0] > 0).long()
loader = DataLoader(TensorDataset(x[:384], y[:384]), batch_size=32, shuffle=True)
val = DataLoader(TensorDataset(x[384:], y[384:]), batch_size=64)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
max_steps, step = 30, 0
while step < max_steps:
    model.train()
    for xb, yb in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
        step += 1
        if step >= max_steps:
            break
model.eval()
with torch.no_grad():
    correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
print(f"acc {correct / 128:.3f}")
