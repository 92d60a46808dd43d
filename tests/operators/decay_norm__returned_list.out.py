import torch
import torch.nn.functional as F


def parameter_groups(named, wd):
    decay, rest = [], []
    for name, p in named:
        (rest if p.ndim <= 1 else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": wd}]


opt = torch.optim.AdamW(parameter_groups(net.named_parameters(), 0.05), lr=1e-3)
for x, y in batches:
    loss = F.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
