"""A small, correct training run for the untrusted-script cases to wrap."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(epochs=3):
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] > 0).long()
    train_loader = DataLoader(TensorDataset(x[:384], y[:384]), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[384:], y[384:]), batch_size=64)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val_loader)
        print(f"epoch {epoch}  acc {correct / 128:.3f}")
