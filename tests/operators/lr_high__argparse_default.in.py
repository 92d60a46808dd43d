import argparse

import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


def main():
    parser = argparse.ArgumentParser(description="MNIST")
    parser.add_argument("--epochs", type=int, default=14, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR", help="learning rate (default: 1.0)")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    args = parser.parse_args()
    model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, optimizer, epoch)
        scheduler.step()
