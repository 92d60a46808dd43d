import torch

model = torch.nn.Linear(4, 2)
print(model(torch.randn(3, 4)))
