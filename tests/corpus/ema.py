# expect:
"""Classifier with an exponential moving average (EMA) of its weights, validated with the EMA copy."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
C, D = 4, 16


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * C, D, generator=torch.Generator().manual_seed(7)) * 1.3
    k = torch.randint(0, 2 * C, (n,), generator=g)
    return centres[k] + torch.randn(n, D, generator=g), k % C


xtr, ytr = make_data(2000, 1)
xva, yva = make_data(500, 2)
train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(xva, yva), batch_size=250)

model = nn.Sequential(nn.Linear(D, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, C))
ema = copy.deepcopy(model)
ema.requires_grad_(False)
decay = 0.95


@torch.no_grad()
def update_ema(ema_model, model, d):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.mul_(d).add_(p, alpha=1 - d)
    for ema_b, b in zip(ema_model.buffers(), model.buffers()):
        ema_b.copy_(b)


opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(5):
    model.train()
    total = 0.0
    for x, y in train_loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        update_ema(ema, model, decay)
        total += loss.item()
    ema.eval()
    correct = n = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (ema(x).argmax(1) == y).sum().item()
            n += len(y)
    print(f"epoch {epoch} loss {total / len(train_loader):.4f} ema acc {correct / n:.3f}")
