import torch
from torch.nn import functional as F

torch.manual_seed(0)
xs, ys = torch.randn(256, 8), torch.randint(0, 3, (256,))
net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
temperature = 2.0

step = 0
while step < 200:
    idx = torch.randint(0, 256, (32,))
    # scores are divided by a temperature before the loss
    loss = F.cross_entropy(net(xs[idx]) / temperature, ys[idx], label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1

with torch.no_grad():
    val = F.cross_entropy(net(xs), ys)  # evaluation: never backpropagated
print(f"final loss {val.item():.3f}")
