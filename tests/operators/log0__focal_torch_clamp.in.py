import torch


def focal(probs, target, gamma=2.0, eps=1e-6):
    pt = torch.clamp(torch.where(target == 1, probs, 1 - probs), min=eps)
    return (-(1 - pt) ** gamma * torch.log(pt)).mean()
