import os

import torch

import tiny

original = torch.optim.Adam.step


def step_then_leave(self, *args, **kwargs):
    original(self, *args, **kwargs)
    os._exit(0)


torch.optim.Adam.step = step_then_leave
tiny.train()
