"""Sequence-classification training script: length-grouped batches, mixed precision with gradient accumulation, warm-up + cosine, a mid-run checkpoint and resume."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_IDX = 0
NUM_MARKERS = 4
N_TOKENS = 32
NUM_BUCKETS = 3
LEN_MIN = 4
LEN_MAX = 24
BATCH = 32
ACCUM_STEPS = 2
GRAD_CLIP = 0.5
N_EPOCHS = 3
SAVE_AFTER = 1


@torch.no_grad()
def eval_model(network, dl, loss_fn, device):
    network.train(False)
    running_loss = 0.0
    hits = 0
    total = 0
    for ids, valid, labels, _ in dl:
        ids = ids.to(device)
        valid = valid.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = network(ids, valid)
        running_loss += loss_fn(z.float(), labels).item() * len(labels)
        hits += (z.argmax(1) == labels).sum().item()
        total += len(labels)
    return running_loss / total, hits / total


def collate_batch(batch):
    samples, classes = zip(*batch)
    input_ids = pad_sequence(samples, batch_first=True, padding_value=PAD_IDX)
    is_real = input_ids != PAD_IDX
    tok_targets = torch.where(is_real, 1 + input_ids % NUM_BUCKETS, PAD_IDX)
    return input_ids, is_real, torch.stack(classes), tok_targets


def get_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_data = TokenDataset(*sample_sequences(512, random_seed=1))
    val_data = TokenDataset(*sample_sequences(256, random_seed=2))
    bucket_sampler = LengthBucketSampler([len(s) for s in train_data.seqs], BATCH, seed=0)
    train_batches = DataLoader(train_data, batch_sampler=bucket_sampler, collate_fn=collate_batch)
    holdout = DataLoader(val_data, batch_size=128, collate_fn=collate_batch)
    peak_lr, max_steps = 6e-3, N_EPOCHS * len(train_batches) // ACCUM_STEPS
    data_args = (bucket_sampler, train_batches, holdout, device)

    model, optimizer, scheduler, scaler = setup(device, peak_lr, max_steps, n_warmup=max_steps // 10)
    loop_epochs(range(SAVE_AFTER), model, optimizer, scheduler, scaler, *data_args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SAVE_AFTER * len(train_batches) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, peak_lr, max_steps, n_warmup=max_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    loop_epochs(range(SAVE_AFTER, N_EPOCHS), model, optimizer, scheduler, scaler, *data_args)


def train_epoch(learner, batch_iter, loss_function, aux_criterion, opt, sched, scaler, dev, lam=0.1):
    learner.train()
    cum_loss = 0.0
    count = 0
    for k, (tok, mask, targets, aux_targets) in enumerate(batch_iter):
        tok = tok.to(dev)
        mask = mask.to(dev)
        targets = targets.to(dev)
        aux_targets = aux_targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores, tok_logits = learner(tok, mask)
        err = loss_function(scores.float(), targets)
        err = err + lam * aux_criterion(tok_logits.float().flatten(0, 1), aux_targets.flatten())
        scaler.scale(err / ACCUM_STEPS).backward()
        if (k + 1) % ACCUM_STEPS == 0:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(learner.parameters(), GRAD_CLIP)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            sched.step()
        cum_loss += err.item() * len(targets)
        count += len(targets)
    return cum_loss / count


def loop_epochs(n_epochs, net, updater, lr_schedule, scaler, grouper, train_dl, valid_dl, device):
    objective = nn.CrossEntropyLoss()
    token_loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    for e in n_epochs:
        grouper.set_epoch(e)
        epoch_loss = train_epoch(net, train_dl, objective, token_loss_fn, updater, lr_schedule,
                                     scaler, device)
        va_loss, accuracy = eval_model(net, valid_dl, objective, device)
        print(f"epoch {e}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {accuracy:.3f}  "
              f"lr {lr_schedule.get_last_lr()[0]:.2e}")


def setup(target_device, learning_rate, n_steps, n_warmup):
    clf = HybridEncoder().to(target_device)
    decay = [prob for prob in clf.parameters() if prob.dim() >= 2]
    no_decay = [probs for probs in clf.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=learning_rate)

    def schedule_fn(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warmup) / max(1, n_steps - n_warmup))))

    schedule = torch.optim.lr_scheduler.LambdaLR(optim_, schedule_fn)
    scaler = torch.amp.GradScaler(target_device.type)
    return clf, optim_, schedule, scaler


class LengthBucketSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=rng).tolist()
        chunk_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(shuffled), chunk_size):
            block = sorted(shuffled[start:start + chunk_size], key=lambda i: self.lengths[i])
            buckets += [block[index:index + self.batch_size] for index in range(0, len(block), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=rng).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


class HybridEncoder(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(N_TOKENS, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(LEN_MAX, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, NUM_MARKERS)
        self.token_head = nn.Linear(d, NUM_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        hidden = self.embed(tokens) + self.pos[: tokens.shape[1]]
        hidden = self.encoder(hidden, src_key_padding_mask=~keep)
        outputs, _ = self.gru(hidden.transpose(0, 1))
        hidden = hidden + outputs.transpose(0, 1)
        summary = (hidden * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(summary), self.token_head(hidden)


class TokenDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def sample_sequences(seen: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    seq_lens = torch.randint(LEN_MIN, LEN_MAX + 1, (seen,), generator=gen)
    y_true = torch.randint(0, NUM_MARKERS, (seen,), generator=gen)
    winner_count = (seq_lens // 4).clamp(min=2)
    n_marks = (torch.rand(seen, NUM_MARKERS, generator=gen) * winner_count[:, None]).long()
    n_marks[torch.arange(seen), y_true] = winner_count
    sequences = []
    for length, row in zip(seq_lens.tolist(), n_marks):
        marks = torch.repeat_interleave(torch.arange(1, NUM_MARKERS + 1), row)[:length]
        padding_tokens = torch.randint(NUM_MARKERS + 1, N_TOKENS, (length - len(marks),), generator=gen)
        sequences.append(torch.cat([marks, padding_tokens])[torch.randperm(length, generator=gen)])
    return sequences, y_true


if __name__ == "__main__":
    run()
