from torch.optim.lr_scheduler import LinearLR


def train(model, optimiser, loader, warmup=None):
    for step, (x, y) in enumerate(loader):
        optimiser.zero_grad()
        model(x, y).backward()
        optimiser.step()
    if warmup is not None:
        warmup.step()


optimiser = make_optimiser()
warmup = LinearLR(optimiser, start_factor=0.1, total_iters=100)
for epoch in range(3):
    train(model, optimiser, loader, warmup=warmup)
