import torch
from torch.utils.data import DataLoader, TensorDataset


def synthetic_table(rows: int, columns: int = 12):
    """A table of readings whose class is a noisy function of the first three."""
    table = torch.zeros((rows, columns))
    table.normal_(0.0, 1.0)
    score = table[:, :3].sum(1) + 0.3 * torch.randn(rows)
    target = torch.bucketize(score, torch.tensor([-1.0, 0.0, 1.0]))
    return (table - table.mean(0)) / table.std(0), target


features, labels = synthetic_table(2048)
loader = DataLoader(TensorDataset(features, labels), batch_size=128, shuffle=True)
