from torch.nn.utils import clip_grad_norm_


def step(model, optimizer, scaler, loss, max_grad_norm=None):
    scaler.scale(loss).backward()
    if max_grad_norm is not None:
        clip_grad_norm_(model.parameters(), max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
