import torch
import torch.nn.functional as F

net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3)
features, labels = torch.randn(200, 16), torch.randint(0, 4, (200,))


def train(epoch):
    """One full-batch update: the whole graph fits at once."""
    net.train()
    optimizer.zero_grad()  # the previous epoch's gradients are stale
    loss = F.cross_entropy(net(features), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def accuracy():
    net.eval()
    return (net(features).argmax(1) == labels).float().mean().item()


for epoch in range(1, 51):
    loss = train(epoch)
    if epoch % 10 == 0:
        print(f"epoch {epoch:3d}  loss {loss:.3f}  acc {accuracy():.3f}")
