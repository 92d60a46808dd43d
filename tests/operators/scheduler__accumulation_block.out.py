def train_one_epoch(model, loader, optimizer, scheduler, scaler, accum=2):
    for i, (x, y) in enumerate(loader):
        scaler.scale(model(x, y) / accum).backward()
        if (i + 1) % accum == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
    scheduler.step()


optimizer = torch.optim.AdamW(model.parameters())
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / 100)
for epoch in range(3):
    train_one_epoch(model, loader, optimizer, scheduler, scaler)
