"""Fit a next-character model (a GRU memory carried across chunks, causal self-attention, a tied output head) and report validation loss."""
import argparse
import math
import os

import torch
from torch import nn
import torch.nn.functional as F

CHARS = " .abcdefghijklmnopqrstuvwxyz"
V = len(CHARS)
B, T, D = 32, 16, 32


def make_corpus(n_sentences: int, s: int) -> str:
    gen = torch.Generator().manual_seed(s)
    words = {"det": ["the", "a", "every"], "adj": ["small", "green", "quick", "old"],
             "noun": ["cat", "dog", "bird", "fish", "horse"], "verb": ["sees", "eats", "likes", "chases"]}

    def pick(kind: str) -> str:
        pool = words[kind]
        return pool[int(torch.randint(len(pool), (1,), generator=gen))]

    lines = []
    for _ in range(n_sentences):
        subj = [pick("det")] + ([pick("adj")] if torch.rand(1, generator=gen) < 0.5 else []) + [pick("noun")]
        lines.append(" ".join(subj + [pick("verb"), pick("det"), pick("noun")]) + ".")
    return " ".join(lines) + " "


def encode_text(text: str) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text], dtype=torch.long)


def run_epoch(learner, data, optim_, schedule, target_device, clip_norm=0.5):
    learner.train()
    state = torch.zeros(1, B, D, device=target_device)
    cum_loss, steps_per_epoch = 0.0, ((len(data) - 1) // B) // T
    for step in range(steps_per_epoch):
        features, targets = batch_at(data, step)
        features, targets = features.to(target_device), targets.to(target_device)
        state = state.detach()
        raw, state = learner(features, state)
        cost = F.cross_entropy(raw.view(-1, V), targets.view(-1))
        optim_.zero_grad(set_to_none=True)
        cost.backward()
        nn.utils.clip_grad_norm_(learner.parameters(), clip_norm)
        optim_.step()
        schedule.step()
        cum_loss += cost.item()
    return cum_loss / steps_per_epoch


def batch_at(data: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    span = (len(data) - 1) // B
    positions = [b * span + step * T for b in range(B)]
    batch_x = torch.stack([data[idx:idx + T] for idx in positions])
    labels = torch.stack([data[k + 1:k + 1 + T] for k in positions])
    return batch_x, labels


@torch.no_grad()
def eval_model(net, data, where):
    net.eval()
    memory = torch.zeros(1, B, D, device=where)
    loss_sum = 0.0
    n_chunks = ((len(data) - 1) // B) // T
    for step in range(n_chunks):
        xb, yb = batch_at(data, step)
        xb = xb.to(where)
        yb = yb.to(where)
        scores, memory = net(xb, memory)
        loss_sum += F.cross_entropy(scores.view(-1, V), yb.view(-1)).item()
    return loss_sum / n_chunks


class RecurrentAttnLM(nn.Module):
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
        z = z + self.drop(self.attn(a, a, a, need_weights=False)[0])
        return self.head(self.norm2(z)), hidden


def get_device(choice: str | None) -> torch.device:
    device_name = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def entry() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(cli.parse_args().device)
    torch.manual_seed(0)
    train_ids = encode_text(make_corpus(300, s=1))
    val_tokens = encode_text(make_corpus(50, s=2))
    run_training(RecurrentAttnLM(), train_ids, val_tokens, device)


def run_training(clf, train_tokens, val_ids, dev, max_epochs=4, peak_lr=2e-2, warmup_steps=3):
    clf.to(dev)
    decay = [probs for probs in clf.parameters() if probs.dim() >= 2]
    no_decay = [q for q in clf.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=peak_lr)
    total = max_epochs * (((len(train_tokens) - 1) // B) // T)

    def warmup_then_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total - warmup_steps)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_then_cosine)
    for e in range(max_epochs):
        tr_loss = run_epoch(clf, train_tokens, opt, sched, dev)
        va_loss = eval_model(clf, val_ids, dev)
        print(f"epoch {e}  train {tr_loss:.4f}  val {va_loss:.4f}  lr {sched.get_last_lr()[0]:.2e}")
    return clf


if __name__ == "__main__":
    entry()
