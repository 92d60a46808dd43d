import torch
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self, width=32, code=4):
        super().__init__()
        self.inp = nn.Linear(784, width)
        self.code = nn.Linear(width, code)
        self.out = nn.Linear(code, 784)

    def encode(self, x):
        return self.code(torch.relu(self.inp(x)))

    def decode(self, z):
        return torch.sigmoid(self.out(z))

    def forward(self, x):
        return self.decode(self.encode(x))
