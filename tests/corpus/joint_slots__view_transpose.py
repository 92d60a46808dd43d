# expect: batch-independence health
"""Imitates a joint intent-detection and slot-filling model (ATIS style): word and tag vocabularies built
from strings, a bidirectional LSTM over packed sequences, an intent head on the mean of the real time steps
and a per-word slot tagger whose padded tags are ignored; batches are dicts."""
import random

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

CITIES = ["boston", "denver", "dallas", "oakland", "atlanta", "seattle", "austin", "miami"]
FILLER = ["please", "i", "want", "show", "me", "the", "a", "on", "monday", "morning", "cheap"]
INTENTS = {"flight": ["flights", "flight"], "fare": ["fare", "price"], "airline": ["airline", "carrier"]}
WORDS = ["<pad>", "<unk>", "from", "to"] + CITIES + FILLER + sum(INTENTS.values(), [])
TAGS = ["<pad>", "O", "B-from", "B-to"]
word2id = {w: i for i, w in enumerate(WORDS)}
tag2id = {t: i for i, t in enumerate(TAGS)}
intent2id = {name: i for i, name in enumerate(INTENTS)}
PAD_WORD, PAD_TAG = word2id["<pad>"], tag2id["<pad>"]


def utterance(rng):
    intent = rng.choice(list(INTENTS))
    src, dst = rng.sample(CITIES, 2)
    words = rng.sample(FILLER, rng.randint(0, 5)) + [rng.choice(INTENTS[intent]), "from", src, "to", dst]
    words += rng.sample(FILLER, rng.randint(0, 4))
    tags = ["O"] * len(words)
    tags[words.index("from") + 1], tags[words.index("to") + 1] = "B-from", "B-to"
    return {"words": [word2id[w] for w in words], "tags": [tag2id[t] for t in tags], "intent": intent2id[intent]}


def batchify(examples):
    return {
        "words": pad_sequence([torch.tensor(e["words"]) for e in examples], batch_first=True, padding_value=PAD_WORD),
        "tags": pad_sequence([torch.tensor(e["tags"]) for e in examples], batch_first=True, padding_value=PAD_TAG),
        "lengths": torch.tensor([len(e["words"]) for e in examples]),
        "intent": torch.tensor([e["intent"] for e in examples]),
    }


class JointModel(nn.Module):
    def __init__(self, n_words, n_tags, n_intents, emb_dim=24, hidden=24):
        super().__init__()
        self.embedding = nn.Embedding(n_words, emb_dim, padding_idx=PAD_WORD)
        self.lstm = nn.LSTM(emb_dim, hidden, bidirectional=True)
        self.slot_out = nn.Linear(2 * hidden, n_tags)
        self.intent_out = nn.Linear(2 * hidden, n_intents)

    def forward(self, words, lengths):
        embedded = self.embedding(words)  # (batch, time, emb)
        packed = pack_padded_sequence(embedded.view(words.shape[1], words.shape[0], -1), lengths.cpu(), enforce_sorted=False)
        outputs, _ = self.lstm(packed)
        outputs, _ = pad_packed_sequence(outputs, total_length=words.shape[1])  # (time, batch, 2 * hidden)
        outputs = outputs.transpose(0, 1)
        real = (torch.arange(words.shape[1], device=words.device)[None, :] < lengths[:, None]).unsqueeze(-1)
        sentence = (outputs * real).sum(dim=1) / lengths[:, None]
        return self.intent_out(sentence), self.slot_out(outputs)


def run():
    rng = random.Random(7)
    torch.manual_seed(7)
    train_data = [utterance(rng) for _ in range(240)]
    dev_data = [utterance(rng) for _ in range(96)]
    model = JointModel(len(WORDS), len(TAGS), len(INTENTS))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    intent_criterion = nn.CrossEntropyLoss()
    slot_criterion = nn.CrossEntropyLoss(ignore_index=PAD_TAG)
    for epoch in range(3):
        model.train()
        train_data.sort(key=lambda e: len(e["words"]) + rng.random() * 3)  # roughly grouped by length
        starts = list(range(0, len(train_data), 24))
        rng.shuffle(starts)
        for start in starts:
            batch = batchify(train_data[start:start + 24])
            intent_logits, slot_logits = model(batch["words"], batch["lengths"])
            loss = intent_criterion(intent_logits, batch["intent"]) + 0.1 * slot_criterion(
                slot_logits.reshape(-1, len(TAGS)), batch["tags"].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            batch = batchify(dev_data)
            intent_logits, slot_logits = model(batch["words"], batch["lengths"])
            intent_acc = (intent_logits.argmax(-1) == batch["intent"]).float().mean().item()
            real = batch["tags"] != PAD_TAG
            slot_acc = (slot_logits.argmax(-1) == batch["tags"])[real].float().mean().item()
        print(f"epoch {epoch}: loss {loss.item():.3f} intent acc {intent_acc:.3f} slot acc {slot_acc:.3f}")


if __name__ == "__main__":
    run()
