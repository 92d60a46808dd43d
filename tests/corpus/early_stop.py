# expect:
"""Classifier with a per-epoch step cap, inference_mode validation, patience-based early stopping, best reload."""
import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

K, D = 4, 16


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * K, D, generator=torch.Generator().manual_seed(0)) * 1.3
    c = torch.randint(0, 2 * K, (n,), generator=g)
    return centres[c] + torch.randn(n, D, generator=g), c % K


def evaluate(model, loader, crit):
    model.eval()
    tot = correct = n = 0
    with torch.inference_mode():
        for x, y in loader:
            out = model(x)
            tot += crit(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item(); n += len(y)
    return tot / n, correct / n


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 64), nn.ReLU(),
                          nn.Dropout(0.3), nn.Linear(64, K))
    train = DataLoader(TensorDataset(*make_data(4096, 1)), batch_size=32, shuffle=True,
                       generator=torch.Generator().manual_seed(0))
    val = DataLoader(TensorDataset(*make_data(512, 2)), batch_size=128)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    crit = nn.CrossEntropyLoss()
    max_steps_per_epoch, patience, bad = 20, 2, 0
    best_loss, best_state = float("inf"), None
    for epoch in range(30):
        model.train()
        tot = 0.0
        for step, (x, y) in enumerate(train):
            if step >= max_steps_per_epoch:
                break
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            tot += loss.item()
        val_loss, acc = evaluate(model, val, crit)
        print(f"epoch {epoch} train {tot / max_steps_per_epoch:.3f} val {val_loss:.3f} acc {acc:.3f}")
        if val_loss < best_loss - 1e-3:
            best_loss, best_state, bad = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= patience:
                print(f"early stop at epoch {epoch}")
                break
    model.load_state_dict(best_state)
    print("best reloaded: val loss %.3f acc %.3f" % evaluate(model, val, crit))


if __name__ == "__main__":
    main()
