import sys

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(1000):
    for i in range(0, 256, 32):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
        optimizer.step()
    print(f"epoch {epoch}")
    if epoch == 2:
        sys.exit(0)
