import torch
import torch.nn.functional as F
from torch.func import functional_call


class MetaLearner:
    def __init__(self, net, inner_lr=0.4, meta_lr=1e-3):
        self.net = net
        self.inner_lr = inner_lr
        self.meta_opt = torch.optim.Adam(net.parameters(), lr=meta_lr)

    def adapted(self, x_s, y_s):
        weights = dict(self.net.named_parameters())
        support_loss = F.cross_entropy(functional_call(self.net, weights, (x_s,)), y_s)
        grads = torch.autograd.grad(support_loss, tuple(weights.values()), create_graph=True)
        return {k: w - self.inner_lr * g for (k, w), g in zip(weights.items(), grads)}

    def meta_step(self, batch):
        self.meta_opt.zero_grad()
        total = 0.0
        for x_s, y_s, x_q, y_q in batch:
            weights = self.adapted(x_s, y_s)
            total = total + F.cross_entropy(functional_call(self.net, weights, (x_q,)), y_q)
        (total / len(batch)).backward()
        self.meta_opt.step()
