"""A job that makes its DataLoaders anew for every epoch (as many tutorials do): --epochs counts its passes all the
same, and stops the third before its first update."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 8)
y = (x[:, 0] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10_000):
    for xb, yb in DataLoader(TensorDataset(x[:384], y[:384]), batch_size=32, shuffle=True):
        optimizer.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        optimizer.step()
    with torch.no_grad():
        val = DataLoader(TensorDataset(x[384:], y[384:]), batch_size=64)
        acc = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
    print(f"epoch {epoch} acc {acc / 128:.3f}")
