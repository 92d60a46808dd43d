import torch
import torch.nn as nn

model = nn.Linear(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for epoch in range(5):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        model.zero_grad()
        optimizer.step()
    print(epoch, loss.item())
