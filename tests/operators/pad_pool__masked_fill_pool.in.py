import torch
from torch import nn


class Summariser(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, states, lengths):
        real = torch.arange(states.size(1))[None, :] < lengths[:, None]
        # average the real positions only
        summary = self.proj(states).masked_fill(~real[..., None], 0.0).sum(dim=1) / lengths[:, None].float()
        return torch.tanh(summary)
