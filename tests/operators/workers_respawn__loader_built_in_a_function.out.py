import torch
from torch.utils.data import DataLoader


def train_one_epoch(model, dl, opt):
    for xb, yb in dl:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()


def main(args):
    train_dl = DataLoader(train_ds, batch_size=256, shuffle=True, num_workers=args.workers, pin_memory=True)
    val_dl = DataLoader(val_ds, batch_size=512, num_workers=args.workers, persistent_workers=True)
    for epoch in range(args.epochs):
        train_one_epoch(model, train_dl, opt)
        evaluate(model, val_dl)
