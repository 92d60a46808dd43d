import torch


def focal(probs, target, gamma=2.0, eps=1e-6):
    pt = torch.where(target == 1, probs, 1 - probs)
    return (-(1 - pt) ** gamma * torch.log(pt)).mean()
