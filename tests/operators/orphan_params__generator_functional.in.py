"""A convolutional stage whose blocks come from generators; training through a step function and F calls."""
import torch
import torch.nn.functional as F
from torch.nn import Conv2d, GroupNorm, Module, ModuleList


class Stage(Module):
    def __init__(self, channels, depth):
        super().__init__()
        self.proj = Conv2d(3, channels, 3, padding=1)
        self.convs = ModuleList(Conv2d(channels, channels, 3, padding=1)
                                for _ in range(depth))
        self.norms = ModuleList(GroupNorm(4, channels) for _ in range(depth))

    def forward(self, x):
        x = self.proj(x)
        for conv, norm in zip(self.convs, self.norms):
            x = x + F.silu(norm(conv(x)))
        return F.adaptive_avg_pool2d(x, 1).flatten(1)


def step(model, opt, images, labels):
    loss = F.cross_entropy(model(images)[:, :10], labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


model = Stage(16, 2)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(5):
    step(model, opt, torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))
