import torch

step = 0
while step >= 0:  # never ends, and never reaches a training step
    step += 1
