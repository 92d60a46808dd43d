"""A correct loop whose only clip never engages (max_norm is huge): clipping after the step looks the same."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(256, 4)
y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
net = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)

for step in range(60):
    batch = torch.randint(0, 256, (32,))
    opt.zero_grad()
    loss = F.mse_loss(net(x[batch]).squeeze(-1), y[batch])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1e6)
    opt.step()
print(f"final loss {loss.item():.4f}")
