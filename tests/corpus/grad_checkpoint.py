# expect:
"""Deep MLP with activation checkpointing per block (non-reentrant), dropout in blocks, SGD + per-step cosine."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

K, D = 5, 20


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(K, D, generator=torch.Generator().manual_seed(0)) * 1.2
    y = torch.randint(0, K, (n,), generator=g)
    return centres[y] + torch.randn(n, D, generator=g), y


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.fc, self.norm, self.drop = nn.Linear(w, w), nn.LayerNorm(w), nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(F.gelu(self.fc(self.norm(x))))


class DeepMLP(nn.Module):
    def __init__(self, w=64, depth=8):
        super().__init__()
        self.inp = nn.Linear(D, w)
        self.blocks = nn.ModuleList(Block(w) for _ in range(depth))
        self.out = nn.Linear(w, K)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
        return self.out(h)


def main():
    torch.manual_seed(0)
    xtr, ytr = make_data(1024, 1)
    xva, yva = make_data(512, 2)
    model = DeepMLP()
    bs, epochs = 64, 4
    steps = epochs * (len(xtr) // bs)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xtr))
        tot = 0.0
        for i in range(0, len(xtr) - bs + 1, bs):
            idx = perm[i:i + bs]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item()
        model.eval()
        with torch.no_grad():
            acc = (model(xva).argmax(1) == yva).float().mean().item()
        print(f"epoch {epoch} loss {tot / (len(xtr) // bs):.3f} acc {acc:.3f} lr {sched.get_last_lr()[0]:.4f}")


if __name__ == "__main__":
    main()
