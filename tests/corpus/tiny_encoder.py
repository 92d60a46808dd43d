# expect:
"""Imitates a small ViT/BERT-style encoder classifier: token and learned position embeddings, a ModuleList of
pre-norm attention blocks, mean pooling, AdamW with a no-decay group built from named_parameters(), linear warm-up
then cosine decay per step through LambdaLR, gradient clipping; the task: which marker token occurs most often."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

VOCAB, MARKERS, LENGTH = 16, 4, 24


def make_sequences(n, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(MARKERS, VOCAB, (n, LENGTH), generator=g)
    labels = torch.randint(0, MARKERS, (n,), generator=g)
    counts = torch.randint(0, 3, (n, MARKERS), generator=g)
    counts[torch.arange(n), labels] = 5
    for i in range(n):
        markers = torch.repeat_interleave(torch.arange(MARKERS), counts[i])
        slots = torch.randperm(LENGTH, generator=g)[:len(markers)]
        ids[i, slots] = markers
    return ids, labels


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self, dim=32, depth=2, heads=4, num_classes=MARKERS):
        super().__init__()
        self.tok_embed = nn.Embedding(VOCAB, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, LENGTH, dim))
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)

    def forward(self, ids):
        x = self.tok_embed(ids) + self.pos_embed[:, :ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x).mean(dim=1))


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "embed" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
    return factor


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = seen = 0
    for ids, labels in loader:
        correct += (model(ids).argmax(-1) == labels).sum().item()
        seen += labels.numel()
    return correct / seen


def main():
    torch.manual_seed(0)
    train_ds = TensorDataset(*make_sequences(256, seed=1))
    val_ds = TensorDataset(*make_sequences(256, seed=2))
    train_dl = DataLoader(train_ds, batch_size=32, shuffle=True)
    val_dl = DataLoader(val_ds, batch_size=128)
    model = Encoder()
    epochs = 4
    total = epochs * len(train_dl)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=3e-3, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(total // 10, total))
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for ids, labels in train_dl:
            loss = F.cross_entropy(model(ids), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            running += loss.item()
        print(f"epoch {epoch} loss {running / len(train_dl):.4f} val_acc {evaluate(model, val_dl):.3f}")


if __name__ == "__main__":
    main()
