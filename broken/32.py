"""Fit a next-character model (a GRU memory carried across chunks, causal self-attention, a tied output head) and report validation loss."""
import argparse
import math
import os

import torch
from torch import nn
import torch.nn.functional as F

CHARS = " .abcdefghijklmnopqrstuvwxyz"
V = len(CHARS)
B = 32
T = 16
D = 32


def batch_at(data: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    span = (len(data) - 1) // B
    offsets = [b * span + step * T for b in range(B)]
    inputs = torch.stack([data[idx:idx + T] for idx in offsets])
    labels = torch.stack([data[k:k + T] for k in offsets])
    return inputs, labels


def tokenize(text: str) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text], dtype=torch.long)


@torch.no_grad()
def score_model(learner, data, dev):
    learner.eval()
    memory = torch.zeros(1, B, D, device=dev)
    running_loss = 0.0
    steps_per_epoch = ((len(data) - 1) // B) // T
    for step in range(steps_per_epoch):
        batch_x, yb = batch_at(data, step)
        batch_x = batch_x.to(dev)
        yb = yb.to(dev)
        scores, memory = learner(batch_x, memory)
        running_loss += F.cross_entropy(scores.view(-1, V), yb.view(-1)).item()
    return running_loss / steps_per_epoch


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_tokens = tokenize(generate_text(300, rng_seed=1))
    val_stream = tokenize(generate_text(50, rng_seed=2))
    train_model(CharLM(), train_tokens, val_stream, device)


def train_model(network, train_ids, val_ids, target_device, n_epochs=4, learning_rate=2e-2, warmup_steps=3):
    network.to(target_device)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in network.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=learning_rate)
    total = n_epochs * (((len(train_ids) - 1) // B) // T)

    def warmup_then_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total - warmup_steps)))

    lr_schedule = torch.optim.lr_scheduler.LambdaLR(updater, warmup_then_cosine)
    for e in range(n_epochs):
        epoch_loss = fit_epoch(network, train_ids, updater, lr_schedule, target_device)
        holdout_loss = score_model(network, val_ids, target_device)
        print(f"epoch {e}  train {epoch_loss:.4f}  val {holdout_loss:.4f}  lr {lr_schedule.get_last_lr()[0]:.2e}")
    return network


def fit_epoch(net, data, optim_, schedule, where, clip_norm=0.5):
    net.train()
    state = torch.zeros(1, B, D, device=where)
    cum_loss, n_chunks = 0.0, ((len(data) - 1) // B) // T
    for step in range(n_chunks):
        xb, targets = batch_at(data, step)
        xb = xb.to(where)
        targets = targets.to(where)
        state = state.detach()
        raw, state = net(xb, state)
        batch_loss = F.cross_entropy(raw.view(-1, V), targets.view(-1))
        optim_.zero_grad(set_to_none=True)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip_norm)
        optim_.step()
        schedule.step()
        cum_loss += batch_loss.item()
    return cum_loss / n_chunks


def generate_text(n_sentences: int, rng_seed: int) -> str:
    gen = torch.Generator().manual_seed(rng_seed)
    words = {"det": ["the", "a", "every"], "adj": ["small", "green", "quick", "old"],
             "noun": ["cat", "dog", "bird", "fish", "horse"], "verb": ["sees", "eats", "likes", "chases"]}

    def pick(kind: str) -> str:
        candidates = words[kind]
        return candidates[int(torch.randint(len(candidates), (1,), generator=gen))]

    sents = []
    for _ in range(n_sentences):
        head_np = [pick("det")] + ([pick("adj")] if torch.rand(1, generator=gen) < 0.5 else []) + [pick("noun")]
        sents.append(" ".join(head_np + [pick("verb"), pick("det"), pick("noun")]) + ".")
    return " ".join(sents) + " "


def get_device(choice: str | None) -> torch.device:
    device_name = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


class CharLM(nn.Module):
    def __init__(self, dim: int = D, heads: int = 2, dropout: float = 0.1):
        super().__init__()
        self.emb = nn.Embedding(V, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, V, bias=False)
        self.head.weight = self.emb.weight
        nn.init.normal_(self.emb.weight, std=dim ** -0.5)

    def forward(self, x: torch.Tensor, hidden: torch.Tensor | None = None):
        z, hidden = self.rnn(self.emb(x), hidden)
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1), device=x.device)
        a = self.norm1(z)
        z = z + self.drop(self.attn(a, a, a, attn_mask=mask, need_weights=False)[0])
        return self.head(self.norm2(z)), hidden


if __name__ == "__main__":
    entry()
