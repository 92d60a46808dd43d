# expect:
"""Imitates a human-activity-recognition script: accelerometer windows in milli-g (gravity on the z axis), per-channel
standardisation with the training split's statistics, a small Conv1d network, a config dataclass, Adam and a
patience counter on the validation accuracy."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    window: int = 32
    n_train: int = 640
    n_test: int = 256
    batch_size: int = 32
    epochs: int = 4
    lr: float = 3e-3
    patience: int = 3


ACTIVITIES = ("walking", "running", "sitting", "climbing")


def synth_windows(n, window, seed):
    """Three accelerometer axes in milli-g: gravity (~1000 mg) on z, a per-activity rhythm and amplitude, noise."""
    g = torch.Generator().manual_seed(seed)
    activity = torch.randint(0, len(ACTIVITIES), (n,), generator=g)
    freq = torch.tensor([1.8, 2.8, 0.1, 1.2])[activity]
    amp = torch.tensor([250.0, 600.0, 20.0, 350.0])[activity]
    t = torch.arange(window) / 50.0
    phase = 6.28 * torch.rand(n, 1, generator=g)
    rhythm = torch.sin(6.28 * freq[:, None] * t + phase)
    axes = torch.stack([amp[:, None] * rhythm, 0.5 * amp[:, None] * rhythm.roll(5, 1),
                        1000.0 + 0.3 * amp[:, None] * rhythm], dim=1)
    return axes + 40.0 * torch.randn(n, 3, window, generator=g), activity


class ActivityNet(nn.Module):
    def __init__(self, channels=3, classes=len(ACTIVITIES)):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, 16, kernel_size=5, padding=2)
        self.conv2 = nn.Conv1d(16, 32, kernel_size=5, padding=2)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.mean(dim=2))


def accuracy(model, loader):
    model.eval()
    hits = seen = 0
    with torch.no_grad():
        for xb, yb in loader:
            hits += (model(xb).argmax(dim=1) == yb).sum().item()
            seen += yb.numel()
    return hits / seen


def main(cfg=Config()):
    torch.manual_seed(0)
    train_x, train_y = synth_windows(cfg.n_train, cfg.window, seed=1)
    test_x, test_y = synth_windows(cfg.n_test, cfg.window, seed=2)
    channel_mean = train_x.mean(dim=(0, 2), keepdim=True)
    channel_std = train_x.std(dim=(0, 2), keepdim=True)
    train_x = (train_x - channel_mean) / channel_std
    test_x = (test_x - channel_mean) / channel_std
    train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=cfg.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=100)

    model = ActivityNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    best, waited = 0.0, 0
    for epoch in range(cfg.epochs):
        model.train()
        running = 0.0
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            running += loss.item()
        acc = accuracy(model, test_loader)
        print(f"epoch {epoch + 1}/{cfg.epochs}  loss {running / len(train_loader):.4f}  test acc {acc:.3f}")
        if acc > best:
            best, waited = acc, 0
        else:
            waited += 1
            if waited >= cfg.patience:
                break


if __name__ == "__main__":
    main()
