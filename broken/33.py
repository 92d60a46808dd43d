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


def train_epoch(net, data, updater, lr_schedule, target_device, clip=0.5):
    net.train()
    h_state = torch.zeros(1, B, D, device=target_device)
    cum_loss = 0.0
    steps_per_epoch = ((len(data) - 1) // B) // T
    for step in range(steps_per_epoch):
        batch_x, targets = batch_at(data, step)
        batch_x, targets = batch_x.to(target_device), targets.to(target_device)
        h_state = h_state.detach()
        scores, h_state = net(batch_x, h_state)
        err = F.cross_entropy(scores.view(-1, V), targets.view(-1))
        updater.zero_grad(set_to_none=True)
        err.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        updater.step()
        lr_schedule.step()
        cum_loss += err.item()
    return cum_loss / steps_per_epoch


def batch_at(data: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    stream_len = (len(data) - 1) // B
    begins = [b * stream_len + step * T for b in range(B)]
    features = torch.stack([data[k:k + T] for k in begins])
    labels = torch.stack([data[idx + 1:idx + 1 + T] for idx in begins])
    return features, labels


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
        self.head.weight = nn.Parameter(self.emb.weight.clone())
        nn.init.normal_(self.emb.weight, std=dim ** -0.5)

    def forward(self, x: torch.Tensor, hidden: torch.Tensor | None = None):
        feats, hidden = self.rnn(self.emb(x), hidden)
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1), device=x.device)
        a = self.norm1(feats)
        feats = feats + self.drop(self.attn(a, a, a, attn_mask=mask, need_weights=False)[0])
        return self.head(self.norm2(feats)), hidden


@torch.no_grad()
def eval_model(network, data, dev):
    network.train(False)
    state = torch.zeros(1, B, D, device=dev)
    running_loss, num_chunks = 0.0, ((len(data) - 1) // B) // T
    for step in range(num_chunks):
        inputs, yb = batch_at(data, step)
        inputs = inputs.to(dev)
        yb = yb.to(dev)
        raw, state = network(inputs, state)
        running_loss += F.cross_entropy(raw.view(-1, V), yb.view(-1)).item()
    return running_loss / num_chunks


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_tokens = to_ids(generate_text(300, random_seed=1))
    val_ids = to_ids(generate_text(50, random_seed=2))
    run_training(RecurrentAttnLM(), train_tokens, val_ids, device)


def generate_text(n_sentences: int, random_seed: int) -> str:
    gen = torch.Generator().manual_seed(random_seed)
    words = {"det": ["the", "a", "every"], "adj": ["small", "green", "quick", "old"],
             "noun": ["cat", "dog", "bird", "fish", "horse"], "verb": ["sees", "eats", "likes", "chases"]}

    def pick(kind: str) -> str:
        candidates = words[kind]
        return candidates[int(torch.randint(len(candidates), (1,), generator=gen))]

    phrases = []
    for _ in range(n_sentences):
        head_np = [pick("det")] + ([pick("adj")] if torch.rand(1, generator=gen) < 0.5 else []) + [pick("noun")]
        phrases.append(" ".join(head_np + [pick("verb"), pick("det"), pick("noun")]) + ".")
    return " ".join(phrases) + " "


def to_ids(text: str) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text], dtype=torch.long)


def resolve_device(wanted: str | None) -> torch.device:
    label = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def run_training(learner, train_ids, val_stream, where, max_epochs=4, learning_rate=2e-2, n_warmup=3):
    learner.to(where)
    decay = [prob for prob in learner.parameters() if prob.dim() >= 2]
    no_decay = [q for q in learner.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=learning_rate)
    total = max_epochs * (((len(train_ids) - 1) // B) // T)

    def schedule_fn(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * (step - n_warmup) / max(1, total - n_warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optim_, schedule_fn)
    for epoch_idx in range(max_epochs):
        epoch_loss = train_epoch(learner, train_ids, optim_, schedule, where)
        eval_loss = eval_model(learner, val_stream, where)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {eval_loss:.4f}  lr {schedule.get_last_lr()[0]:.2e}")
    return learner


if __name__ == "__main__":
    entry()
