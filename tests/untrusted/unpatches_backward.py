import torch

import tiny

torch.autograd.backward = torch.autograd.backward.__wrapped__
tiny.train()
