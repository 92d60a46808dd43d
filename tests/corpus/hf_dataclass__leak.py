# expect: graphs-retained padding-waste
"""A Hugging-Face-Trainer-like loop: dict batches, padded sequences, model computes its own loss."""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
VOCAB, PAD, MAXLEN = 50, 0, 24


from dataclasses import dataclass
from typing import Optional


@dataclass
class ModelOutput:
    """A plain dataclass output (as many non-HF codebases write it)."""
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None


class SeqDataset(Dataset):
    """Label: whether token 7 appears more often than token 9 in the sequence."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(6, MAXLEN, (1,), generator=g))
            ids = torch.randint(1, VOCAB, (length,), generator=g)
            extra = torch.randint(0, 2, (1,), generator=g).item()
            ids[torch.randperm(length, generator=g)[:3]] = 7 if extra else 9
            label = int((ids == 7).sum() > (ids == 9).sum())
            self.items.append((ids, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        ids, label = self.items[i]
        return {"input_ids": ids, "labels": label}


def collate(features):
    longest = max(len(f["input_ids"]) for f in features)
    input_ids = torch.full((len(features), longest), PAD, dtype=torch.long)
    mask = torch.zeros(len(features), longest, dtype=torch.long)
    for i, f in enumerate(features):
        input_ids[i, : len(f["input_ids"])] = f["input_ids"]
        mask[i, : len(f["input_ids"])] = 1
    return {"input_ids": input_ids, "attention_mask": mask,
            "labels": torch.tensor([f["labels"] for f in features], dtype=torch.long)}


class TinyClassifier(nn.Module):
    def __init__(self, dim=32, labels=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Dropout(0.1))
        self.classifier = nn.Linear(dim, labels)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, input_ids, attention_mask, labels=None):
        h = self.encoder(self.embed(input_ids))
        m = attention_mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
        logits = self.classifier(pooled)
        loss = self.loss_fct(logits, labels) if labels is not None else None
        return ModelOutput(loss=loss, logits=logits)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


train_ds, eval_ds = SeqDataset(600, 1), SeqDataset(300, 2)
train_loader = DataLoader(train_ds, batch_size=16, shuffle=True, collate_fn=collate)
eval_loader = DataLoader(eval_ds, batch_size=64, collate_fn=collate)
model = TinyClassifier()
ACCUM, EPOCHS, EVAL_EVERY = 2, 4, 40
steps = EPOCHS * math.ceil(len(train_loader) / ACCUM)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
scheduler = get_linear_schedule_with_warmup(optimizer, steps // 10, steps)


def evaluate():
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for batch in eval_loader:
            out = model(**batch)
            loss_sum += out.loss.item() * len(batch["labels"])
            correct += (out.logits.argmax(-1) == batch["labels"]).sum().item()
            total += len(batch["labels"])
    model.train()
    return loss_sum / total, correct / total


global_step = 0
tr_loss = 0.0
model.train()
model.zero_grad()
for epoch in range(EPOCHS):
    for step, batch in enumerate(train_loader):
        outputs = model(**batch)
        loss = outputs.loss / ACCUM
        loss.backward()
        tr_loss += loss
        if (step + 1) % ACCUM == 0 or step + 1 == len(train_loader):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % EVAL_EVERY == 0:
                eval_loss, acc = evaluate()
                print(f"step {global_step} lr {scheduler.get_last_lr()[0]:.5f} eval_loss {eval_loss:.4f} acc {acc:.3f}")
print("final", evaluate())
