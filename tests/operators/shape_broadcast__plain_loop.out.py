import torch
from torch.utils.data import DataLoader, TensorDataset

x = torch.randn(256, 3)
y = x.sum(1) + 0.1 * torch.randn(256)
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
criterion = torch.nn.L1Loss()
opt = torch.optim.SGD(net.parameters(), lr=0.05)

for epoch in range(5):
    for xb, yb in loader:
        out = net(xb)
        loss = criterion(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        print(epoch, (net(x)[:, 0] - y).abs().mean().item())
