import torch

for it in range(max_iters):
    for micro_step in range(grad_accum_steps):
        logits, loss = model(X, Y)
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
