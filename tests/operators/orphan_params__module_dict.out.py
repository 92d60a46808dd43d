# a shared trunk and one head per task, trained in a plain loop with no functions
import torch
import torch.nn as nn
import torch.nn.functional as F

TASKS = {"species": 7, "habitat": 3}


class MultiHead(nn.Module):
    def __init__(self, tasks, width=64):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(20, width), nn.GELU(), nn.Linear(width, width), nn.GELU())
        self.heads = {
            name: nn.Linear(width, classes)
            for name, classes in tasks.items()
        }

    def forward(self, x):
        shared = self.trunk(x)
        return {name: head(shared) for name, head in self.heads.items()}


net = MultiHead(TASKS)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(256, 20)
targets = {name: torch.randint(0, k, (256,)) for name, k in TASKS.items()}
for step in range(100):
    outputs = net(x)
    loss = sum(F.cross_entropy(outputs[name], targets[name]) for name in TASKS)
    opt.zero_grad()
    loss.backward()
    opt.step()
