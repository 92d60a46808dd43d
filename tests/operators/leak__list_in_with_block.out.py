import torch

history = []
for images, labels in train_loader:
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        err = loss_fn(input=net(images), target=labels)
    err.backward()
    opt.step()
    history.append(err)
