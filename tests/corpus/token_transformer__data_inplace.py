# expect: grad-check
"""Imitates a "text classification with nn.TransformerEncoder" tutorial: token ids padded per batch, an embedding
scaled by sqrt(d_model), sinusoidal positions in a buffer, a key-padding mask passed by keyword, masked mean
pooling, AdamW with a linear warmup (LambdaLR), gradient clipping and an accuracy evaluation."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD, VOCAB, NUM_CLASSES = 0, 24, 3


class MajorityTokens(Dataset):
    """Noise tokens plus copies of tokens 1, 2 and 3; the label is whichever of the three occurs most often."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            length = int(torch.randint(10, 20, (1,), generator=g))
            ids = torch.randint(4, VOCAB, (length,), generator=g)
            label = int(torch.randint(0, NUM_CLASSES, (1,), generator=g))
            counts = torch.randint(0, 3, (NUM_CLASSES,), generator=g)
            counts[label] = counts.max() + 1 + int(torch.randint(0, 2, (1,), generator=g))
            marks = torch.cat([torch.full((int(c),), k + 1) for k, c in enumerate(counts)])
            ids[torch.randperm(length, generator=g)[:len(marks)]] = marks[:length]
            self.samples.append((ids, label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


def collate_batch(batch):
    ids, labels = zip(*batch)
    tokens = pad_sequence(ids, batch_first=True, padding_value=PAD)
    return tokens, tokens == PAD, torch.tensor(labels)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class TransformerClassifier(nn.Module):
    def __init__(self, d_model: int = 32, nhead: int = 2, num_layers: int = 1, dim_feedforward: int = 64):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(d_model, NUM_CLASSES)

    def forward(self, tokens, padding_mask=None):
        x = self.embedding(tokens)
        x.data.mul_(math.sqrt(self.d_model))
        x = self.pos_encoder(x)
        x = self.encoder(x, src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).float()
        pooled = (x * keep).sum(1) / keep.sum(1)
        return self.classifier(pooled)


def train_epoch(model, loader, optimizer, scheduler):
    model.train()
    total, count = 0.0, 0
    for tokens, padding_mask, labels in loader:
        logits = model(tokens, padding_mask=padding_mask)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        total += loss.item() * len(labels)
        count += len(labels)
    return total / count


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct = count = 0
    for tokens, padding_mask, labels in loader:
        correct += (model(tokens, padding_mask=padding_mask).argmax(1) == labels).sum().item()
        count += len(labels)
    return correct / count


def main():
    torch.manual_seed(0)
    train_loader = DataLoader(MajorityTokens(384, seed=1), batch_size=32, shuffle=True, collate_fn=collate_batch)
    val_loader = DataLoader(MajorityTokens(256, seed=2), batch_size=128, collate_fn=collate_batch)
    model = TransformerClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warmup = 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    for epoch in range(4):
        loss = train_epoch(model, train_loader, optimizer, scheduler)
        print(f"epoch {epoch}  train loss {loss:.4f}  val acc {evaluate(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
