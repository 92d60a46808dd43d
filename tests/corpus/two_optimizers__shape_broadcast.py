# expect: loss-shapes health
"""Shared trunk + classification and regression heads (ce + 0.5*mse), plus an auxiliary model with its own optimizer."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

K, D = 4, 12


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(K, D, generator=torch.Generator().manual_seed(0)) * 1.5
    y = torch.randint(0, K, (n,), generator=g)
    x = centres[y] + torch.randn(n, D, generator=g)
    r = x[:, :3].sum(1) * 0.5 + 0.1 * torch.randn(n, generator=g)  # a regression target
    return x, y, r


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 64), nn.ReLU())
        self.cls = nn.Linear(64, K)
        self.reg = nn.Linear(64, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.reg(h).squeeze(-1)


def main():
    torch.manual_seed(0)
    model, aux = MultiTask(), nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    aux_opt = torch.optim.SGD(aux.parameters(), lr=0.02)
    train = DataLoader(TensorDataset(*make_data(1024, 1)), batch_size=64, shuffle=True,
                       generator=torch.Generator().manual_seed(0))
    val = DataLoader(TensorDataset(*make_data(256, 2)), batch_size=128)
    for epoch in range(4):
        model.train(); aux.train()
        tot = aux_tot = 0.0
        for x, y, r in train:
            opt.zero_grad()
            logits, pred = model(x)
            ce, mse = F.cross_entropy(logits, y), F.mse_loss(pred, r)
            loss = ce + 0.5 * mse
            loss.backward()
            opt.step()
            aux_opt.zero_grad()
            aux_loss = F.mse_loss(aux(x), r)
            aux_loss.backward()
            aux_opt.step()
            tot += loss.item(); aux_tot += aux_loss.item()
        model.eval(); aux.eval()
        correct = n = 0
        with torch.no_grad():
            for x, y, r in val:
                logits, _ = model(x)
                correct += (logits.argmax(1) == y).sum().item(); n += len(y)
        print(f"epoch {epoch} loss {tot / len(train):.3f} aux {aux_tot / len(train):.3f} acc {correct / n:.3f}")


if __name__ == "__main__":
    main()
