"""A parameter of a tensor subclass that refuses gradient hooks: the checker cannot observe the run, and must say
that the failure is its own rather than blame the script."""
import torch
import torch.nn as nn


class NoHooks(nn.Parameter):
    def register_hook(self, hook):
        raise RuntimeError("this parameter refuses hooks")


layer = nn.Linear(4, 1)
layer.weight = NoHooks(layer.weight.detach().clone())
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
for step in range(20):
    loss = layer(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done")
