import torch

amp = torch.autocast(device_type="cpu", dtype=torch.bfloat16)
for step in range(steps):
    for k in range(accumulate):
        xb, yb = next(batches)
        with amp:
            out = net(xb)
            loss = torch.nn.functional.mse_loss(out, yb)
            loss = loss / accumulate
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
