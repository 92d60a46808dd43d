import torch
from torch import nn
from torch.func import functional_call


class Maml(nn.Module):
    def __init__(self, net: nn.Module, inner_lr: float = 0.4, inner_steps: int = 1):
        super().__init__()
        self.net = net
        self.inner_lr = inner_lr
        self.inner_steps = inner_steps

    def fast_weights(self, x, y):
        fast = dict(self.net.named_parameters())
        for _ in range(self.inner_steps):
            logits = functional_call(self.net, fast, (x,))
            loss = nn.functional.cross_entropy(logits, y)
            grads = torch.autograd.grad(loss, list(fast.values()), create_graph=self.training)
            fast = {key: w - self.inner_lr * g for (key, w), g in zip(fast.items(), grads)}
        return fast

    def forward(self, x_support, y_support, x_query):
        return functional_call(self.net, self.fast_weights(x_support, y_support), (x_query,))
