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
VOCAB_SIZE = 32
N_BUCKETS = 3
LEN_MIN, MAX_TOKENS = 4, 24
BS = 32
ACCUM_STEPS = 2
GRAD_CLIP = 0.5
NUM_EPOCHS = 3
CKPT_EPOCH = 1


def make_run(target_device, base_lr, n_steps, warmup_steps):
    clf = HybridEncoder().to(target_device)
    decay = [q for q in clf.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in clf.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=base_lr)

    def warmup_then_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / max(1, n_steps - warmup_steps))))

    lr_schedule = torch.optim.lr_scheduler.LambdaLR(opt, warmup_then_cosine)
    scaler = torch.amp.GradScaler(target_device.type)
    return clf, opt, lr_schedule, scaler


def do_epochs(n_epochs, net, optim_, schedule, scaler, grouper, training_data, valid_dl, device):
    loss_fn = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    for epoch_idx in n_epochs:
        grouper.set_epoch(epoch_idx)
        epoch_loss = train_epoch(net, training_data, loss_fn, aux_criterion, optim_, schedule,
                                     scaler, device)
        eval_loss, val_acc = score_model(net, valid_dl, loss_fn, device)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  "
              f"lr {schedule.get_last_lr()[0]:.2e}")


class LengthBucketSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        perm = torch.randperm(len(self.lengths), generator=gen).tolist()
        chunk_size = 8 * self.batch_size
        batch_list = []
        for start in range(0, len(perm), chunk_size):
            group = sorted(perm[start:start + chunk_size], key=lambda i: self.lengths[i])
            batch_list += [group[index:index + self.batch_size] for index in range(0, len(group), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=gen).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def choose_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def collate_batch(batch):
    sequences, classes = zip(*batch)
    input_ids = pad_sequence(sequences, batch_first=True, padding_value=PAD_IDX)
    is_real = input_ids != PAD_IDX
    aux_targets = torch.where(is_real, 1 + input_ids % N_BUCKETS, PAD_IDX)
    return input_ids, is_real, torch.stack(classes), aux_targets


def train_epoch(network, batch_iter, objective, tok_loss, updater, sched, scaler, dev, aux_weight=0.1):
    network.train()
    loss_sum = 0.0
    n_examples = 0
    for k, (tok, mask, targets, per_token_y) in enumerate(batch_iter):
        tok = tok.to(dev)
        mask = mask.to(dev)
        targets = targets.to(dev)
        per_token_y = per_token_y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            raw, tok_logits = network(tok, mask)
        err = objective(raw.float(), targets)
        err = err + aux_weight * tok_loss(tok_logits.float().flatten(0, 1), per_token_y.flatten())
        scaler.scale(err).backward()
        if (k + 1) % ACCUM_STEPS == 0:
            scaler.unscale_(updater)
            nn.utils.clip_grad_norm_(network.parameters(), GRAD_CLIP)
            scaler.step(updater)
            scaler.update()
            updater.zero_grad(set_to_none=True)
            sched.step()
        loss_sum += err.item() * len(targets)
        n_examples += len(targets)
    return loss_sum / n_examples


@torch.no_grad()
def score_model(learner, dl, loss_function, device):
    learner.eval()
    running_loss = 0.0
    right = 0
    total = 0
    for ids, valid, labels, _ in dl:
        ids, valid, labels = ids.to(device), valid.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            scores, _ = learner(ids, valid)
        running_loss += loss_function(scores.float(), labels).item() * len(labels)
        right += (scores.argmax(1) == labels).sum().item()
        total += len(labels)
    return running_loss / total, right / total


class SeqDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def sample_sequences(count: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    rng = torch.Generator().manual_seed(rng_seed)
    sizes = torch.randint(LEN_MIN, MAX_TOKENS + 1, (count,), generator=rng)
    y_true = torch.randint(0, NUM_MARKERS, (count,), generator=rng)
    lead = (sizes // 4).clamp(min=2)
    freq = (torch.rand(count, NUM_MARKERS, generator=rng) * lead[:, None]).long()
    freq[torch.arange(count), y_true] = lead
    items = []
    for length, row in zip(sizes.tolist(), freq):
        signal = torch.repeat_interleave(torch.arange(1, NUM_MARKERS + 1), row)[:length]
        rest = torch.randint(NUM_MARKERS + 1, VOCAB_SIZE, (length - len(signal),), generator=rng)
        items.append(torch.cat([signal, rest])[torch.randperm(length, generator=rng)])
    return items, y_true


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(ap.parse_args().device)
    torch.manual_seed(0)
    train_data = SeqDataset(*sample_sequences(512, rng_seed=1))
    val_data = SeqDataset(*sample_sequences(256, rng_seed=2))
    bucket_sampler = LengthBucketSampler([len(s) for s in train_data.seqs], BS, seed=0)
    train_batches = DataLoader(train_data, batch_sampler=bucket_sampler, collate_fn=collate_batch)
    holdout = DataLoader(val_data, batch_size=128, collate_fn=collate_batch)
    learning_rate = 6e-3
    num_steps = NUM_EPOCHS * len(train_batches) // ACCUM_STEPS
    data_args = (bucket_sampler, train_batches, holdout, device)

    model, optimizer, scheduler, scaler = make_run(device, learning_rate, num_steps, warmup_steps=num_steps // 10)
    do_epochs(range(CKPT_EPOCH), model, optimizer, scheduler, scaler, *data_args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": CKPT_EPOCH * len(train_batches) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = make_run(device, learning_rate, num_steps, warmup_steps=num_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    scheduler.load_state_dict(snapshot["scheduler"])
    scaler.load_state_dict(snapshot["scaler"])
    do_epochs(range(CKPT_EPOCH, NUM_EPOCHS), model, optimizer, scheduler, scaler, *data_args)


class HybridEncoder(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, NUM_MARKERS)
        self.token_head = nn.Linear(d, N_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        hidden = self.embed(tokens) + self.pos[: tokens.shape[1]]
        hidden = self.encoder(hidden, src_key_padding_mask=~keep)
        preds, _ = self.gru(hidden.transpose(0, 1))
        hidden = hidden + preds.transpose(0, 1)
        sent_vec = (hidden * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(sent_vec), self.token_head(hidden)


if __name__ == "__main__":
    run()
