# expect:
"""A BatchNorm + dropout classifier wrapped in torch.compile(backend="eager"), the wrapper used throughout."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

K, D = 3, 16


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * K, D, generator=torch.Generator().manual_seed(0)) * 1.5
    c = torch.randint(0, 2 * K, (n,), generator=g)
    return centres[c] + torch.randn(n, D, generator=g), c % K


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, K))
    model = torch.compile(model, backend="eager", fullgraph=True)
    train = DataLoader(TensorDataset(*make_data(1024, 1)), batch_size=64, shuffle=True, drop_last=True,
                       generator=torch.Generator().manual_seed(0))
    val = DataLoader(TensorDataset(*make_data(256, 2)), batch_size=64)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    crit = nn.CrossEntropyLoss()
    for epoch in range(4):
        model.train()
        tot = 0.0
        for x, y in train:
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            tot += loss.item()
        model.eval()
        correct = n = 0
        with torch.no_grad():
            for x, y in val:
                correct += (model(x).argmax(1) == y).sum().item(); n += len(y)
        print(f"epoch {epoch} loss {tot / len(train):.3f} acc {correct / n:.3f}")


if __name__ == "__main__":
    main()
    import torch._dynamo.utils as U; print("GB", dict(U.counters["graph_break"])); print("STATS", dict(U.counters["stats"]))
