import torch
import torch.nn.functional as F

net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 3))
teacher = torch.nn.Linear(8, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)

for epoch in range(5):
    net.train()
    for xb, yb in train_batches:
        with torch.no_grad():  # the teacher is frozen: not a validation, not a site
            soft = teacher(xb).softmax(-1)
        loss = F.cross_entropy(net(xb), yb) + F.cross_entropy(net(xb), soft)
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    # score the held-out batches
    with torch.no_grad():  # no graphs needed here
        right = 0
        for xb, yb in held_out:
            right += (net(xb).argmax(1) == yb).sum().item()
        # every held-out sample counted
    print(f"epoch {epoch}: {right / n_held_out:.3f}")
