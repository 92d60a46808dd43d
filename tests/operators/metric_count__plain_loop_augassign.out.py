"""No functions: training and a held-out check in one loop, the hit count turned into a fraction in place."""
import torch
from torch.utils.data import DataLoader, TensorDataset

features, targets = torch.randn(700, 5), torch.randint(0, 3, (700,))
train_dl = DataLoader(TensorDataset(features[:500], targets[:500]), batch_size=50, shuffle=True)
held_out = DataLoader(TensorDataset(features[500:], targets[500:]), batch_size=64)
net = torch.nn.Linear(5, 3)
sgd = torch.optim.SGD(net.parameters(), lr=0.1)

for epoch in range(5):
    for xb, yb in train_dl:
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), yb).backward()
        sgd.step()
    with torch.no_grad():
        hits = 0
        for xb, yb in held_out:
            hits += (net(xb).argmax(1) == yb).sum().item()
        hits /= len(held_out)
    print(f"epoch {epoch}: held-out accuracy {hits:.1%}")
