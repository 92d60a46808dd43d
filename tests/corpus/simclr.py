# expect: workers-respawn
"""SimCLR-style contrastive pre-training with NT-Xent, then a linear probe on frozen features."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

torch.manual_seed(0)
C, D = 4, 16


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(C, D, generator=torch.Generator().manual_seed(5)) * 1.5
    y = torch.randint(0, C, (n,), generator=g)
    return centres[y] + 0.8 * torch.randn(n, D, generator=g), y


class TwoViews(Dataset):
    """Two random augmentations (feature dropout, jitter, scaling) drawn from the global torch RNG."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def augment(self, x):
        keep = (torch.rand(x.shape) > 0.2).float()
        return (x * keep + 0.3 * torch.randn(x.shape)) * (0.8 + 0.4 * torch.rand(1))

    def __getitem__(self, i):
        x = self.x[i]
        return self.augment(x), self.augment(x)


class Encoder(nn.Module):
    def __init__(self, dim=64, proj=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D, dim), nn.BatchNorm1d(dim), nn.ReLU(), nn.Linear(dim, dim),
                                 nn.BatchNorm1d(dim), nn.ReLU())
        self.projector = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, proj))

    def forward(self, x, project=True):
        h = self.net(x)
        return self.projector(h) if project else h


def nt_xent(z1, z2, tau=0.2):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = z1.shape[0]
    sim = z @ z.t() / tau
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


if __name__ == "__main__":
    xtr, ytr = make_data(512, 1)
    xva, yva = make_data(400, 2)
    loader = DataLoader(TwoViews(xtr), batch_size=128, shuffle=True, num_workers=2, drop_last=True,
                        persistent_workers=False)
    encoder = Encoder()
    opt = torch.optim.Adam(encoder.parameters(), lr=2e-3)
    for epoch in range(4):
        encoder.train()
        total = 0.0
        for v1, v2 in loader:
            z = encoder(torch.cat([v1, v2]))
            loss = nt_xent(*z.chunk(2))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} nt-xent {total / len(loader):.4f}")

    # linear probe on frozen features
    encoder.eval()
    probe = nn.Linear(64, C)
    popt = torch.optim.Adam(probe.parameters(), lr=1e-2)
    probe_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=128, shuffle=True)
    val_loader = DataLoader(TensorDataset(xva, yva), batch_size=200)
    for epoch in range(5):
        for x, y in probe_loader:
            with torch.no_grad():
                feats = encoder(x, project=False)
            loss = F.cross_entropy(probe(feats), y)
            popt.zero_grad()
            loss.backward()
            popt.step()
    correct = n = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (probe(encoder(x, project=False)).argmax(1) == y).sum().item()
            n += len(y)
    print(f"linear probe accuracy {correct / n:.3f}")
