# expect: loss-shapes health
"""Imitates a typical tabular regression script (house-price/sensor style): an MLP on standardized features,
MSELoss on float targets, Adam with StepLR per epoch, validation RMSE and a simple early-stopping helper."""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(7)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
N_FEATURES = 6


def synthesize(n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, N_FEATURES, generator=g) * 4 - 2
    y = torch.sin(X[:, 0]) * 1.5 + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] ** 2 - X[:, 4] + 0.1 * torch.randn(n, generator=g)
    return X, y


X_train, y_train = synthesize(2000, seed=11)
X_valid, y_valid = synthesize(500, seed=12)
x_mu, x_sigma = X_train.mean(0), X_train.std(0)
y_mu, y_sigma = y_train.mean(), y_train.std()
X_train, X_valid = (X_train - x_mu) / x_sigma, (X_valid - x_mu) / x_sigma
y_train, y_valid = (y_train - y_mu) / y_sigma, (y_valid - y_mu) / y_sigma

train_dl = DataLoader(TensorDataset(X_train, y_train), batch_size=100, shuffle=True)
valid_dl = DataLoader(TensorDataset(X_valid, y_valid), batch_size=250)


class Regressor(nn.Module):
    def __init__(self, n_in, widths=(64, 64), p=0.1):
        super().__init__()
        self.fc1 = nn.Linear(n_in, widths[0])
        self.fc2 = nn.Linear(widths[0], widths[1])
        self.drop = nn.Dropout(p)
        self.act = nn.SiLU()
        self.fc_out = nn.Linear(widths[1], 1)

    def forward(self, x):
        x = self.act(self.fc1(x))
        x = self.drop(self.act(self.fc2(x)))
        return self.fc_out(x)


class EarlyStopping:
    def __init__(self, patience=3, min_delta=1e-4):
        self.patience, self.min_delta = patience, min_delta
        self.best, self.bad_epochs = math.inf, 0

    def __call__(self, metric):
        if metric < self.best - self.min_delta:
            self.best, self.bad_epochs = metric, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


model = Regressor(N_FEATURES).to(DEVICE)
loss_func = nn.MSELoss()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
stopper = EarlyStopping(patience=3)


def fit_epoch():
    model.train()
    total, count = 0.0, 0
    for xb, yb in train_dl:
        xb, yb = xb.to(DEVICE), yb.to(DEVICE)
        pred = model(xb)
        loss = loss_func(pred, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(xb)
        count += len(xb)
    return total / count


def validate():
    model.eval()
    with torch.no_grad():
        sq_err = sum(loss_func(model(xb.to(DEVICE)), yb.to(DEVICE)).item() * len(xb) for xb, yb in valid_dl)
    return sq_err / len(valid_dl.dataset)


for epoch in range(8):
    train_mse = fit_epoch()
    valid_mse = validate()
    sched.step()
    rmse = math.sqrt(valid_mse) * y_sigma.item()
    print(f"epoch {epoch + 1}: train_mse={train_mse:.4f} valid_mse={valid_mse:.4f} "
          f"valid_rmse(original units)={rmse:.3f} lr={sched.get_last_lr()[0]:.2e}")
    if stopper(valid_mse):
        print("early stopping")
        break
