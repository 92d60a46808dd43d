import numpy as np
import torch


def sample(tokens: np.ndarray, block: int, batch: int, rng):
    starts = rng.integers(0, len(tokens) - block - 1, size=batch)
    inputs = np.stack([tokens[s:s + block] for s in starts])
    targets = np.stack([tokens[s + 1:s + block + 1] for s in starts])
    return torch.from_numpy(inputs), torch.from_numpy(targets)
