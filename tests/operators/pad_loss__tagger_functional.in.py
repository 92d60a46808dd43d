import torch.nn.functional as F

PAD_TAG = 0


def tagging_loss(scores, tags):
    # scores: (batch, tags, time); tags padded with PAD_TAG
    return F.cross_entropy(
        scores,
        tags,
        ignore_index=PAD_TAG,
    )


for words, tags in loader:
    opt.zero_grad()
    tagging_loss(tagger(words), tags).backward()
    opt.step()
