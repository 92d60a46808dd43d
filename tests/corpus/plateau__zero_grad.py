# expect: grads-accumulate divergence health
"""Imitates a tabular binary-classification script (credit/churn style): standardized features, random_split,
an MLP with dropout that outputs probabilities, a hand-written clamped BCE, Adam and ReduceLROnPlateau."""
import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset, random_split

SEED = 2024
EPOCHS = 6
BATCH_SIZE = 64
LEARNING_RATE = 1e-2
EPS = 1e-7

torch.manual_seed(SEED)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_table(n_rows=1600, n_num=8, n_flags=4):
    """Numeric columns (some heavy-tailed, like incomes and balances) plus 0/1 flags; a hidden score decides the label."""
    numeric = torch.randn(n_rows, n_num)
    numeric[:, :3] = torch.exp(1.2 * numeric[:, :3])          # lognormal 'amount' columns
    flags = (torch.rand(n_rows, n_flags) < 0.3).float()
    table = torch.cat([numeric, flags], dim=1)
    weights = torch.linspace(-1.5, 1.5, table.shape[1])
    score = torch.log1p(table[:, :3]).sum(1) - 4.0 + (table[:, 3:] * weights[3:]).sum(1)
    target = (score + 0.3 * torch.randn(n_rows) > 0).float()
    return table, target


features, target = build_table()
mean, std = features.mean(0), features.std(0)
features = (features - mean) / std
full = TensorDataset(features, target)
n_val = len(full) // 5
train_set, val_set = random_split(full, [len(full) - n_val, n_val], generator=torch.Generator().manual_seed(SEED))
train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_set, batch_size=256)


class TabularNet(nn.Module):
    def __init__(self, n_in, hidden=(64, 64), dropout=0.2):
        super().__init__()
        layers, width = [], n_in
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
            width = h
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return torch.sigmoid(self.out(self.body(x))).squeeze(-1)


def binary_cross_entropy(probs, labels):
    probs = probs.clamp(EPS, 1.0 - EPS)
    return -(labels * torch.log(probs) + (1.0 - labels) * torch.log(1.0 - probs)).mean()


def train_one_epoch(model, loader, optimizer):
    model.train()
    epoch_loss, seen = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        probs = model(xb)
        loss = binary_cross_entropy(probs, yb)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * xb.size(0)
        seen += xb.size(0)
    return epoch_loss / seen


@torch.no_grad()
def validate(model, loader):
    model.eval()
    val_loss, hits, seen = 0.0, 0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        probs = model(xb)
        val_loss += binary_cross_entropy(probs, yb).item() * xb.size(0)
        hits += ((probs > 0.5).float() == yb).sum().item()
        seen += xb.size(0)
    return val_loss / seen, hits / seen


model = TabularNet(features.shape[1]).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=1)

history = {"train_loss": [], "val_loss": [], "val_acc": [], "lr": []}
best_state, best_loss = None, float("inf")
for epoch in range(1, EPOCHS + 1):
    train_loss = train_one_epoch(model, train_loader, optimizer)
    val_loss, val_acc = validate(model, val_loader)
    scheduler.step(val_loss)
    history["train_loss"].append(train_loss)
    history["val_loss"].append(val_loss)
    history["val_acc"].append(val_acc)
    history["lr"].append(optimizer.param_groups[0]["lr"])
    if val_loss < best_loss:
        best_loss, best_state = val_loss, copy.deepcopy(model.state_dict())
    print(f"Epoch {epoch:02d} | train {train_loss:.4f} | val {val_loss:.4f} | acc {val_acc:.3f} | lr {history['lr'][-1]:.1e}")

if best_state is not None:
    model.load_state_dict(best_state)
print(f"best val loss {best_loss:.4f}")
