from torch.nn.utils import clip_grad_norm_
from torch.optim import AdamW


def update(params, opt, loss):
    loss.backward()
    clip_grad_norm_(params, max_norm=0.5)
    opt.step()
    opt.zero_grad()


params = list(model.parameters())
update(params, AdamW(params), loss)
