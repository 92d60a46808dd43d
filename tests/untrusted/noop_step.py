import torch

import tiny

torch.optim.Adam.step = lambda self, closure=None: None
tiny.train()
