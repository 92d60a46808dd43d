# expect:
"""Imitates a Hugging Face-style causal LM: the model takes input_ids and labels, shifts them inside its forward
(logits[..., :-1, :] against labels[..., 1:]) and returns an output object with .loss and .logits; the training
loop passes labels=input_ids, as with a `...ForCausalLM`. Attention through scaled_dot_product_attention with
is_causal=True, learned positions, AdamW, a linear decay."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, CTX, DIM = 16, 24, 32


@dataclass
class CausalLMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


class Block(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, DIM), nn.Embedding(CTX, DIM)
        self.blocks = nn.ModuleList(Block(DIM) for _ in range(2))
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, input_ids, labels=None):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, VOCAB), shift_labels.view(-1))
        return CausalLMOutput(loss=loss, logits=logits)


def sequences(n, seed):
    """Counting sequences with random starts and steps: each next token follows from the two before it."""
    g = torch.Generator().manual_seed(seed)
    start, step = torch.randint(0, VOCAB, (n, 1), generator=g), torch.randint(1, 4, (n, 1), generator=g)
    return (start + step * torch.arange(CTX)) % VOCAB


torch.manual_seed(0)
train, valid = sequences(512, 1), sequences(128, 2)
model = TinyCausalLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
steps = 3 * len(train) // 32
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / steps)
for epoch in range(3):
    model.train()
    for batch in train[torch.randperm(len(train))].split(32):
        out = model(input_ids=batch, labels=batch)
        out.loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        val = model(input_ids=valid, labels=valid).loss
    print(f"epoch {epoch}  train {out.loss.item():.3f}  val {val.item():.3f}")
