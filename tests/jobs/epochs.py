"""A long job over a DataLoader, each epoch followed by an evaluation, its length from the command line: judged
with --epochs, and its evaluation between epochs still runs."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10_000)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(512, 8)
y = (x[:, 0] > 0).long()
train = DataLoader(TensorDataset(x[:384], y[:384]), batch_size=32, shuffle=True)
val = DataLoader(TensorDataset(x[384:], y[384:]), batch_size=64)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
for epoch in range(args.epochs):
    model.train()
    for xb, yb in train:
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
    print(f"epoch {epoch}  val acc {correct / 128:.3f}")
