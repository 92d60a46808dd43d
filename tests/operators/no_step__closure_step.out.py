import torch

optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
for i in range(steps):
    def closure():
        optimizer.zero_grad()
        out = seq(inputs)
        loss = criterion(out, targets)
        loss.backward()
        return loss

    closure()
