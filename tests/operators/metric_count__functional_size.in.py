"""Functional style: a scoring function that sums hits over a loader in a generator, the size read up front."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


def predict(params, x):
    return F.linear(torch.relu(F.linear(x, params["w1"], params["b1"])), params["w2"], params["b2"])


def accuracy(params, loader):
    size = len(loader.dataset)
    with torch.no_grad():
        hits = sum(int((predict(params, x).argmax(dim=1) == y).sum()) for x, y in loader)
    return hits / size


def report(params, dataset):
    return accuracy(params, DataLoader(dataset, batch_size=256))
