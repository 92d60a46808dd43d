"""Sequence-classification training script: length-grouped batches, mixed precision with gradient accumulation, warm-up + cosine, a mid-run checkpoint and resume."""
import argparse
import math
import os

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_ID = 0
NUM_MARKERS = 4
V = 32
NUM_BUCKETS = 3
LEN_MIN = 4
MAX_TOKENS = 24
BS = 32
GRAD_ACCUM = 2
CLIP_NORM = 0.5
N_EPOCHS = 3
CKPT_EPOCH = 1


def create_training(dev, base_lr, n_steps, warmup_steps):
    network = TokenClassifier().to(dev)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=base_lr)

    def schedule_fn(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / max(1, n_steps - warmup_steps))))

    sched = torch.optim.lr_scheduler.LambdaLR(updater, schedule_fn)
    scaler = torch.amp.GradScaler(dev.type)
    return network, updater, sched, scaler


class BucketBatchSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=rng).tolist()
        chunk_size = 8 * self.batch_size
        batch_list = []
        for start in range(0, len(shuffled), chunk_size):
            group = sorted(shuffled[start:start + chunk_size], key=lambda i: self.lengths[i])
            batch_list += [group[idx:idx + self.batch_size] for idx in range(0, len(group), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=rng).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


class TokenDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def train_epochs(num_epochs, net, opt, schedule, scaler, bucket_sampler, train_batches, val_batches, device):
    loss_function = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_ID)
    for epoch_idx in num_epochs:
        bucket_sampler.set_epoch(epoch_idx)
        epoch_loss = run_epoch(net, train_batches, loss_function, aux_criterion, opt, schedule,
                                     scaler, device)
        va_loss, accuracy = score_model(net, val_batches, loss_function, device)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {accuracy:.3f}  "
              f"lr {schedule.get_last_lr()[0]:.2e}")


def pad_collate(batch):
    items, targets = zip(*batch)
    tok = pad_sequence(items, batch_first=True, padding_value=PAD_ID)
    is_real = tok != PAD_ID
    per_token_y = torch.where(is_real, 1 + tok % NUM_BUCKETS, PAD_ID)
    return tok, is_real, torch.stack(targets), per_token_y


def run_epoch(learner, batch_iter, loss_fn, tok_loss, optim_, lr_schedule, scaler, target_device, lam=0.1):
    learner.train()
    running_loss = 0.0
    seen = 0
    for index, (input_ids, mask, classes, aux_targets) in enumerate(batch_iter):
        input_ids, mask = input_ids.to(target_device), mask.to(target_device)
        classes, aux_targets = classes.to(target_device), aux_targets.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            raw, tok_logits = learner(input_ids, mask)
        err = loss_fn(raw.float(), classes)
        err = err + lam * tok_loss(tok_logits.float().flatten(0, 1), aux_targets.flatten())
        scaler.scale(err / GRAD_ACCUM).backward()
        if (index + 1) % GRAD_ACCUM == 0:
            scaler.unscale_(optim_)
            nn.utils.clip_grad_norm_(learner.parameters(), CLIP_NORM)
            scaler.step(optim_)
            scaler.update()
            optim_.zero_grad(set_to_none=True)
            lr_schedule.step()
        running_loss += err.item() * len(classes)
        seen += len(classes)
    return running_loss / seen


def get_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


@torch.no_grad()
def score_model(clf, dl, objective, device):
    clf.train(False)
    loss_sum, right, total = 0.0, 0, 0
    for ids, valid, labels, _ in dl:
        ids = ids.to(device)
        valid = valid.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits, _ = clf(ids, valid)
        loss_sum += objective(logits.float(), labels).item() * len(labels)
        right += (logits.argmax(1) == labels).sum().item()
        total += len(labels)
    return loss_sum / total, right / total


def synth_sequences(count: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    lens = torch.randint(LEN_MIN, MAX_TOKENS + 1, (count,), generator=gen)
    y_true = torch.randint(0, NUM_MARKERS, (count,), generator=gen)
    top_count = (lens // 4).clamp(min=2)
    tallies = (torch.rand(count, NUM_MARKERS, generator=gen) * top_count[:, None]).long()
    tallies[torch.arange(count), y_true] = top_count
    sequences = []
    for length, row in zip(lens.tolist(), tallies):
        signal = torch.repeat_interleave(torch.arange(1, NUM_MARKERS + 1), row)[:length]
        padding_tokens = torch.randint(NUM_MARKERS + 1, V, (length - len(signal),), generator=gen)
        sequences.append(torch.cat([signal, padding_tokens])[torch.randperm(length, generator=gen)])
    return sequences, y_true


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_ds = TokenDataset(*synth_sequences(512, rng_seed=1))
    val_data = TokenDataset(*synth_sequences(256, rng_seed=2))
    grouper = BucketBatchSampler([len(s) for s in train_ds.seqs], BS, seed=0)
    training_data = DataLoader(train_ds, batch_size=BS, shuffle=True, collate_fn=pad_collate)
    holdout = DataLoader(val_data, batch_size=128, collate_fn=pad_collate)
    learning_rate, max_steps = 6e-3, N_EPOCHS * len(training_data) // GRAD_ACCUM
    data_args = (grouper, training_data, holdout, device)

    model, optimizer, scheduler, scaler = create_training(device, learning_rate, max_steps, warmup_steps=max_steps // 10)
    train_epochs(range(CKPT_EPOCH), model, optimizer, scheduler, scaler, *data_args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": CKPT_EPOCH * len(training_data) // GRAD_ACCUM}, "text.pt")

    model, optimizer, scheduler, scaler = create_training(device, learning_rate, max_steps, warmup_steps=max_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    scheduler.load_state_dict(snapshot["scheduler"])
    scaler.load_state_dict(snapshot["scaler"])
    train_epochs(range(CKPT_EPOCH, N_EPOCHS), model, optimizer, scheduler, scaler, *data_args)


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(V, d, padding_idx=PAD_ID)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, NUM_MARKERS)
        self.token_head = nn.Linear(d, NUM_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        scores, _ = self.gru(z.transpose(0, 1))
        z = z + scores.transpose(0, 1)
        mean_h = (z * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(mean_h), self.token_head(z)


if __name__ == "__main__":
    entry()
