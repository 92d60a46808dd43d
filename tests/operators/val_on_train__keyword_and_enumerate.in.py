import torch
import torch.nn.functional as F


def train_epoch(net, batches, opt, scaler=None):
    net.train()
    for step, (x, y) in enumerate(batches):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def validate(net, batches):
    net.eval()
    correct = 0
    with torch.no_grad():
        for x, y in batches:
            correct += (net(x).argmax(1) == y).sum().item()
    return correct


def run(net, opt, loaders, epochs):
    train_batches, val_batches = loaders["train"], loaders["val"]
    for epoch in range(epochs):
        train_epoch(net, batches=train_batches, opt=opt)
        print(epoch, validate(net, batches=val_batches))
