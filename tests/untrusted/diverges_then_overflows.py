"""Trains at a rate far too high, and stops when its own perplexity printout overflows: the loss climbed for 20
steps before anything raised."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(2048, 20)
y = x[:, :4].argmax(1)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
for step in range(60):
    i = torch.randint(0, 2048, (32,))
    loss = F.cross_entropy(model(x[i]), y[i])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 19:
        print(f"step {step}  loss {loss.item():.3f}  perplexity {math.exp(loss.item()):.1f}")
