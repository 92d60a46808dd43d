import torch
from torch import nn

layer = nn.TransformerEncoderLayer(32, 4, batch_first=True)
decoder = nn.TransformerEncoder(layer, 2)


def run(tokens, emb, head):
    causal = torch.triu(torch.full((tokens.size(1), tokens.size(1)), float("-inf")), diagonal=1)
    return head(decoder(emb(tokens), mask=causal))
