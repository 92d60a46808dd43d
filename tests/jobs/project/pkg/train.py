"""A package's training entry point, run as `python -m pkg.train --width 16` from the project folder."""
import argparse

import torch
import torch.nn.functional as F

from pkg.model import make

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, required=True)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] > 0).long()
model = make(args.width)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10_000_000):
    i = step % 8 * 32
    optimizer.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
    optimizer.step()
