"""Tabular data made by one helper, called once per split at module level (a notebook exported to a script)."""
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

N_TRAIN, N_TEST = 2000, 400


def synthesize(rows, seed):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, 12)).astype("float32")
    target = (features[:, :3].sum(1) > 0).astype("int64")
    return torch.from_numpy(features), torch.from_numpy(target)


X_train, y_train = synthesize(N_TRAIN, seed=11)
X_test, y_test = synthesize(N_TRAIN, seed=11)
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)
test_loader = DataLoader(TensorDataset(X_test, y_test), batch_size=256)
