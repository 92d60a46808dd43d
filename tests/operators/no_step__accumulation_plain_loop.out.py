import torch
import torch.nn.functional as F

net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
adam = torch.optim.Adam(net.parameters(), lr=3e-3)
sched = torch.optim.lr_scheduler.StepLR(adam, step_size=1)
accum = 4

for epoch in range(3):
    for i, (xb, yb) in enumerate(batches):
        loss = F.cross_entropy(net(xb), yb) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            # apply the accumulated gradients
            adam.zero_grad(set_to_none=True)
    sched.step()
    with torch.no_grad():
        print(sum(F.cross_entropy(net(xb), yb).item() for xb, yb in held_out))
