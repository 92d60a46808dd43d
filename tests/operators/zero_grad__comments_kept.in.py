import torch

opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:

    # 1. fresh gradients for this batch
    opt.zero_grad()
    # 2. forward and backward
    loss = criterion(net(x), y)
    loss.backward()
    opt.step()
