"""A trainer that never ends by itself (`while True:`), configured only on its command line, importing its model
from a module beside it: judged with --steps, after `--` for its own options."""
import argparse

import torch
import torch.nn.functional as F
from helper import make

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, required=True)
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()

torch.manual_seed(0)
x = torch.randn(256, 8)
y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
model = make(args.width)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
step = 0
while True:
    for i in range(0, len(x), 32):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
        step += 1
    if step % 80 == 0:
        print(f"step {step}  loss {loss.item():.3f}")
