import torch.nn as nn


def repackage_hidden(h):
    """Wrap hidden states in new tensors, detached from their history."""
    if isinstance(h, tuple):
        return tuple(repackage_hidden(v) for v in h)
    return h.detach()


def train(model, corpus, criterion, lr, bptt, ntokens):
    model.train()
    hidden = model.init_hidden(20)
    for batch, i in enumerate(range(0, corpus.size(0) - 1, bptt)):
        data, targets = get_batch(corpus, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, ntokens), targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
