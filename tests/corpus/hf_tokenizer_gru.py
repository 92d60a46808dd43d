# expect:
"""Imitates a Hugging Face-style fine-tuning script for a GRU: a tokenizer whose __call__ pads a list of texts
(padding="longest"), a data collator returning dict batches with an integer attention_mask, a fastai-style sortish
sampler (random chunks sorted by length) reseeded each epoch through set_epoch, and pack_padded_sequence inside the
model."""
import random

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import DataLoader, Dataset, Sampler

torch.manual_seed(0)
WORDS = ["good", "bad"] + [f"w{i}" for i in range(30)]
MAX_LENGTH = 48


class WordTokenizer:
    pad_token_id, unk_token_id = 0, 1

    def __init__(self, words):
        self.vocab = {w: i + 2 for i, w in enumerate(words)}

    def __len__(self):
        return len(self.vocab) + 2

    def __call__(self, texts, padding="longest", max_length=None):
        ids = [[self.vocab.get(w, self.unk_token_id) for w in t.split()][:max_length] for t in texts]
        width = max_length if padding == "max_length" else max(len(i) for i in ids)
        input_ids = torch.full((len(ids), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(len(ids), width, dtype=torch.long)
        for row, seq in enumerate(ids):
            input_ids[row, :len(seq)] = torch.tensor(seq)
            attention_mask[row, :len(seq)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}


def make_reviews(n, seed):
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        words = [rng.choice(WORDS[2:]) for _ in range(rng.randint(3, 40))]
        label = rng.randint(0, 1)
        for k in range(2):
            words[rng.randrange(len(words))] = "good" if label else "bad"
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


class Reviews(Dataset):
    def __init__(self, texts, labels):
        self.texts, self.labels = texts, labels

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        return {"text": self.texts[i], "label": self.labels[i]}


class DataCollatorWithPadding:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features):
        batch = self.tokenizer([f["text"] for f in features], padding="longest", max_length=MAX_LENGTH)
        batch["labels"] = torch.tensor([f["label"] for f in features])
        return batch


class SortishSampler(Sampler):
    """Random chunks of 4 batches, each sorted by length, longest first; the batches' order shuffled."""

    def __init__(self, lengths, bs, seed=0):
        self.lengths, self.bs, self.seed, self.epoch = lengths, bs, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        rng = random.Random(self.seed + self.epoch)
        idx = rng.sample(range(len(self.lengths)), len(self.lengths))
        chunks = [sorted(idx[i:i + 4 * self.bs], key=lambda j: -self.lengths[j]) for i in range(0, len(idx), 4 * self.bs)]
        batches = [c[i:i + self.bs] for c in chunks for i in range(0, len(c), self.bs)]
        rng.shuffle(batches)
        return iter([i for b in batches for i in b])

    def __len__(self):
        return len(self.lengths)


class GRUClassifier(nn.Module):
    def __init__(self, vocab_size, dim=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.classifier = nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask, labels=None):
        lengths = attention_mask.sum(1).cpu()
        packed = pack_padded_sequence(self.embeddings(input_ids), lengths, batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)
        logits = self.classifier(hidden[-1])
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return loss, logits


tokenizer = WordTokenizer(WORDS)
collator = DataCollatorWithPadding(tokenizer)
train_ds, eval_ds = Reviews(*make_reviews(320, 1)), Reviews(*make_reviews(128, 2))
bs = 16
sortish = SortishSampler([len(t.split()) for t in train_ds.texts], bs)
train_dataloader = DataLoader(train_ds, batch_size=bs, sampler=sortish, collate_fn=collator)
eval_dataloader = DataLoader(eval_ds, batch_size=64, collate_fn=collator)
model = GRUClassifier(len(tokenizer))
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2)

for epoch in range(2):
    model.train()
    sortish.set_epoch(epoch)
    for step, batch in enumerate(train_dataloader):
        loss, _ = model(**batch)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in eval_dataloader:
            _, logits = model(**batch)
            correct += (logits.argmax(-1) == batch["labels"]).sum().item()
    print(f"epoch {epoch}: loss {loss.item():.4f} eval_accuracy {correct / len(eval_ds):.4f}")
