import torch

model = build_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
step = 0
while True:
    for micro_step in range(accumulation_steps):
        loss = model(*get_batch()) / accumulation_steps
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    step += 1
    if step >= max_steps:
        break
