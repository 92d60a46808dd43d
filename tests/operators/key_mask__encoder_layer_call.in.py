import torch.nn as nn


class Reader(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.block = nn.TransformerEncoderLayer(d, 4, batch_first=True)

    def forward(self, x, attention_mask):
        return self.block(x, src_mask=None, src_key_padding_mask=attention_mask == 0, is_causal=False)
