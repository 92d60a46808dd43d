"""A correct PyTorch training script: a small sequence classifier on variable-length token sequences.

Each sequence holds filler tokens and a few marker tokens; its label is the marker that occurs most often.
Padding is handled everywhere it matters: the encoder's key padding mask, masked mean pooling, an
auxiliary per-token loss that ignores padded positions, and a length-grouped batch sampler reshuffled each
epoch. Training uses a GradScaler (bf16 autocast on CUDA; on CPU it would only be slower), gradient
accumulation, clipping after unscaling, AdamW without decay on biases and normalisation weights, a
per-step warm-up + cosine schedule, and a mid-run checkpoint from which a fresh model, optimizer,
scheduler and scaler resume.
Run it with `python reference/text.py [--device cuda]`.
"""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD = 0
MARKERS = 4  # tokens 1..4 are markers; the label is the marker that occurs most often
VOCAB = 32
BUCKETS = 3  # auxiliary per-token target: each token's class bucket, 1..BUCKETS (PAD stays PAD)
MIN_LEN, MAX_LEN = 4, 24
BATCH_SIZE = 32
ACCUM = 2
MAX_NORM = 0.5
EPOCHS = 3
RESUME_AFTER = 1  # epochs trained before the checkpoint; the rest run from the resumed state


def make_sequences(n: int, seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Filler tokens with markers sprinkled in; the label's marker always strictly wins."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=g)
    labels = torch.randint(0, MARKERS, (n,), generator=g)
    wins = (lengths // 4).clamp(min=2)
    counts = (torch.rand(n, MARKERS, generator=g) * wins[:, None]).long()  # each below the winner's count
    counts[torch.arange(n), labels] = wins
    seqs = []
    for length, row in zip(lengths.tolist(), counts):
        markers = torch.repeat_interleave(torch.arange(1, MARKERS + 1), row)[:length]
        filler = torch.randint(MARKERS + 1, VOCAB, (length - len(markers),), generator=g)
        seqs.append(torch.cat([markers, filler])[torch.randperm(length, generator=g)])
    return seqs, labels


class TokenSequences(Dataset):
    """Unpadded token sequences and their labels."""

    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def collate(batch):
    seqs, labels = zip(*batch)
    tokens = pad_sequence(seqs, batch_first=True, padding_value=PAD)
    keep = tokens != PAD  # True on real tokens
    token_targets = torch.where(keep, 1 + tokens % BUCKETS, PAD)
    return tokens, keep, torch.stack(labels), token_targets


class LengthGroupedSampler:
    """Batches of similar lengths: shuffle, sort within mega-batches of 8 batches, shuffle the batches."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        mega = 8 * self.batch_size
        batches = []
        for start in range(0, len(order), mega):
            chunk = sorted(order[start:start + mega], key=lambda i: self.lengths[i])
            batches += [chunk[i:i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        for b in torch.randperm(len(batches), generator=g).tolist():
            yield batches[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


class SequenceClassifier(nn.Module):
    """Embedding, a transformer encoder, a GRU, masked mean pooling, and two heads."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)  # batch_first=False: (time, batch, features)
        self.head = nn.Linear(d, MARKERS)
        self.token_head = nn.Linear(d, BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        h = self.encoder(h, src_key_padding_mask=~keep)
        out, _ = self.gru(h.transpose(0, 1))
        h = h + out.transpose(0, 1)
        pooled = (h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(pooled), self.token_head(h)


def build(device, lr, total_steps, warmup):
    model = SequenceClassifier().to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # weight matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and normalisation weights
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr)

    def warmup_cosine(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total_steps - warmup))))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)
    scaler = torch.amp.GradScaler(device.type)
    return model, optimizer, scheduler, scaler


def train_one_epoch(model, loader, criterion, token_criterion, optimizer, scheduler, scaler, device, aux=0.1):
    model.train()
    total_loss, n_seen = 0.0, 0
    for i, (tokens, keep, labels, token_targets) in enumerate(loader):
        tokens, keep = tokens.to(device), keep.to(device)
        labels, token_targets = labels.to(device), token_targets.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits, token_logits = model(tokens, keep)
        loss = criterion(logits.float(), labels)
        loss = loss + aux * token_criterion(token_logits.float().flatten(0, 1), token_targets.flatten())
        scaler.scale(loss / ACCUM).backward()
        if (i + 1) % ACCUM == 0:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
        total_loss += loss.item() * len(labels)
        n_seen += len(labels)
    return total_loss / n_seen


@torch.no_grad()
def evaluate(model, loader, criterion, device):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    for tokens, keep, labels, _ in loader:
        tokens, keep, labels = tokens.to(device), keep.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits, _ = model(tokens, keep)
        total_loss += criterion(logits.float(), labels).item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        n += len(labels)
    return total_loss / n, correct / n


def run_epochs(epochs, model, optimizer, scheduler, scaler, sampler, train_loader, val_loader, device):
    criterion = nn.CrossEntropyLoss()
    token_criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    for epoch in epochs:
        sampler.set_epoch(epoch)
        train_loss = train_one_epoch(model, train_loader, criterion, token_criterion, optimizer, scheduler,
                                     scaler, device)
        val_loss, acc = evaluate(model, val_loader, criterion, device)
        print(f"epoch {epoch}  train {train_loss:.4f}  val {val_loss:.4f}  acc {acc:.3f}  "
              f"lr {scheduler.get_last_lr()[0]:.2e}")


def pick_device(requested: str | None) -> torch.device:
    name = requested or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = pick_device(parser.parse_args().device)
    torch.manual_seed(0)
    train_set = TokenSequences(*make_sequences(512, seed=1))
    val_set = TokenSequences(*make_sequences(256, seed=2))
    sampler = LengthGroupedSampler([len(s) for s in train_set.seqs], BATCH_SIZE, seed=0)
    train_loader = DataLoader(train_set, batch_sampler=sampler, collate_fn=collate)
    val_loader = DataLoader(val_set, batch_size=128, collate_fn=collate)
    lr, total_steps = 6e-3, EPOCHS * len(train_loader) // ACCUM
    args = (sampler, train_loader, val_loader, device)

    model, optimizer, scheduler, scaler = build(device, lr, total_steps, warmup=total_steps // 10)
    run_epochs(range(RESUME_AFTER), model, optimizer, scheduler, scaler, *args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": RESUME_AFTER * len(train_loader) // ACCUM}, "text.pt")

    # Resume as a new process would: everything built afresh, then loaded from the checkpoint.
    model, optimizer, scheduler, scaler = build(device, lr, total_steps, warmup=total_steps // 10)
    state = torch.load("text.pt", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    run_epochs(range(RESUME_AFTER, EPOCHS), model, optimizer, scheduler, scaler, *args)


if __name__ == "__main__":
    main()
