"""Fit a next-character model (a GRU memory carried across chunks, causal self-attention, a tied output head) and report validation loss."""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

CHARS = " .abcdefghijklmnopqrstuvwxyz"
V = len(CHARS)
B = 32
T = 16
D = 32


def tokenize(text: str) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text], dtype=torch.long)


@torch.no_grad()
def score_model(net, data, where):
    net.eval()
    h_state = torch.zeros(1, B, D, device=where)
    running_loss = 0.0
    n_chunks = ((len(data) - 1) // B) // T
    for step in range(n_chunks):
        inputs, yb = make_batch(data, step)
        inputs, yb = inputs.to(where), yb.to(where)
        scores, h_state = net(inputs, h_state)
        running_loss += F.cross_entropy(scores.view(-1, V), yb.view(-1)).item()
    return running_loss / n_chunks


def get_device(asked: str | None) -> torch.device:
    label = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def synth_text(n_sentences: int, rng_seed: int) -> str:
    gen = torch.Generator().manual_seed(rng_seed)
    words = {"det": ["the", "a", "every"], "adj": ["small", "green", "quick", "old"],
             "noun": ["cat", "dog", "bird", "fish", "horse"], "verb": ["sees", "eats", "likes", "chases"]}

    def pick(kind: str) -> str:
        pool = words[kind]
        return pool[int(torch.randint(len(pool), (1,), generator=gen))]

    lines = []
    for _ in range(n_sentences):
        head_np = [pick("det")] + ([pick("adj")] if torch.rand(1, generator=gen) < 0.5 else []) + [pick("noun")]
        lines.append(" ".join(head_np + [pick("verb"), pick("det"), pick("noun")]) + ".")
    return " ".join(lines) + " "


def train_model(learner, train_tokens, val_tokens, dev, max_epochs=4, base_lr=2e-2, n_warmup=3):
    learner.to(dev)
    decay = [probs for probs in learner.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in learner.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=base_lr)
    total = max_epochs * (((len(train_tokens) - 1) // B) // T)

    def warmup_then_cosine(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * (step - n_warmup) / max(1, total - n_warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, warmup_then_cosine)
    for epoch_idx in range(max_epochs):
        tr_loss = fit_epoch(learner, train_tokens, opt, schedule, dev)
        holdout_loss = score_model(learner, val_tokens, dev)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {holdout_loss:.4f}  lr {schedule.get_last_lr()[0]:.2e}")
    return learner


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_ids = tokenize(synth_text(300, rng_seed=1))
    val_stream = tokenize(synth_text(50, rng_seed=2))
    train_model(RecurrentAttnLM(), train_ids, val_stream, device)


def make_batch(data: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    stream_len = (len(data) - 1) // B
    begins = [b * stream_len + step * T for b in range(B)]
    features = torch.stack([data[idx:idx + T] for idx in begins])
    batch_y = torch.stack([data[k + 1:k + 1 + T] for k in begins])
    return features, batch_y


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
        z = z + self.drop(self.attn(a, a, a, attn_mask=mask, need_weights=False)[0])
        return self.head(self.norm2(z)), hidden


def fit_epoch(clf, data, optim_, sched, target_device, clip=0.5):
    clf.train()
    state = torch.zeros(1, B, D, device=target_device)
    cum_loss, steps_per_epoch = 0.0, ((len(data) - 1) // B) // T
    for step in range(steps_per_epoch):
        xb, targets = make_batch(data, step)
        xb, targets = xb.to(target_device), targets.to(target_device)
        raw, state = clf(xb, state)
        batch_loss = F.cross_entropy(raw.view(-1, V), targets.view(-1))
        optim_.zero_grad(set_to_none=True)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(clf.parameters(), clip)
        optim_.step()
        sched.step()
        cum_loss += batch_loss.item()
    return cum_loss / steps_per_epoch


if __name__ == "__main__":
    run()
