"""Fit a sequence model (a transformer encoder and a GRU over embedded tokens, masked mean pooling, an auxiliary per-token head) that tells which marker token occurs most often, and report validation accuracy."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_ID = 0
K_MARKERS = 4
V = 32
AUX_CLASSES = 3
LEN_MIN = 4
MAX_TOKENS = 24
BATCH = 32
ACCUMULATE = 2
GRAD_CLIP = 0.5
N_EPOCHS = 3
CKPT_EPOCH = 1


def setup(target_device, learning_rate, num_steps, ramp_steps):
    network = HybridEncoder().to(target_device)
    decay = [prob for prob in network.parameters() if prob.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=learning_rate)

    def schedule_fn(step: int) -> float:
        if step < ramp_steps:
            return (step + 1) / ramp_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - ramp_steps) / max(1, num_steps - ramp_steps))))

    lr_schedule = torch.optim.lr_scheduler.LambdaLR(opt, schedule_fn)
    scaler = torch.amp.GradScaler(target_device.type)
    return network, opt, lr_schedule, scaler


def resolve_device(asked: str | None) -> torch.device:
    kind = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class VarLenSequences(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def entry() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_data = VarLenSequences(*synth_sequences(512, random_seed=1))
    valid_set = VarLenSequences(*synth_sequences(256, random_seed=2))
    bucket_sampler = LengthBucketSampler([len(s) for s in train_data.seqs], BATCH, seed=0)
    train_batches = DataLoader(train_data, batch_sampler=bucket_sampler, collate_fn=collate_batch)
    holdout = DataLoader(valid_set, batch_size=128, collate_fn=collate_batch)
    base_lr = 6e-3
    max_steps = N_EPOCHS * len(train_batches) // ACCUMULATE
    common = (bucket_sampler, train_batches, holdout, device)

    model, optimizer, scheduler, scaler = setup(device, base_lr, max_steps, ramp_steps=max_steps // 10)
    do_epochs(range(CKPT_EPOCH), model, optimizer, scheduler, scaler, *common)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": CKPT_EPOCH * len(train_batches) // ACCUMULATE}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, base_lr, max_steps, ramp_steps=max_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    scheduler.load_state_dict(snapshot["scheduler"])
    scaler.load_state_dict(snapshot["scaler"])
    do_epochs(range(CKPT_EPOCH, N_EPOCHS), model, optimizer, scheduler, scaler, *common)


@torch.no_grad()
def score_model(learner, dl, loss_fn, device):
    learner.train(False)
    loss_sum, right, count = 0.0, 0, 0
    for input_ids, is_real, labels, _ in dl:
        input_ids = input_ids.to(device)
        is_real = is_real.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            raw, _ = learner(input_ids, is_real)
        loss_sum += loss_fn(raw.float(), labels).item() * len(labels)
        right += (raw.argmax(1) == labels).sum().item()
        count += len(labels)
    return loss_sum / count, right / count


def do_epochs(num_epochs, net, optim_, schedule, scaler, grouper, training_data, val_batches, device):
    loss_function = nn.CrossEntropyLoss()
    token_loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_ID)
    for epoch_idx in num_epochs:
        grouper.set_epoch(epoch_idx)
        epoch_loss = train_epoch(net, training_data, loss_function, token_loss_fn, optim_, schedule,
                                     scaler, device)
        eval_loss, val_acc = score_model(net, val_batches, loss_function, device)
        print(f"epoch {epoch_idx}  train {epoch_loss:.4f}  val {eval_loss:.4f}  acc {val_acc:.3f}  "
              f"lr {schedule.get_last_lr()[0]:.2e}")


def synth_sequences(total: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    rng = torch.Generator().manual_seed(random_seed)
    lens = torch.randint(LEN_MIN, MAX_TOKENS + 1, (total,), generator=rng)
    y_true = torch.randint(0, K_MARKERS, (total,), generator=rng)
    top_count = (lens // 4).clamp(min=2)
    tallies = (torch.rand(total, K_MARKERS, generator=rng) * top_count[:, None]).long()
    tallies[torch.arange(total), y_true] = top_count
    items = []
    for length, row in zip(lens.tolist(), tallies):
        marks = torch.repeat_interleave(torch.arange(1, K_MARKERS + 1), row)[:length]
        rest = torch.randint(K_MARKERS + 1, V, (length - len(marks),), generator=rng)
        items.append(torch.cat([marks, rest])[torch.randperm(length, generator=rng)])
    return items, y_true


class HybridEncoder(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(V, d, padding_idx=PAD_ID)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, K_MARKERS)
        self.token_head = nn.Linear(d, AUX_CLASSES + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        outputs, _ = self.gru(z.view(z.shape[1], z.shape[0], *z.shape[2:]))
        z = z + outputs.transpose(0, 1)
        mean_h = (z * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(mean_h), self.token_head(z)


class LengthBucketSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        idx_order = torch.randperm(len(self.lengths), generator=gen).tolist()
        chunk_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(idx_order), chunk_size):
            block = sorted(idx_order[start:start + chunk_size], key=lambda i: self.lengths[i])
            buckets += [block[k:k + self.batch_size] for k in range(0, len(block), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=gen).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def train_epoch(clf, batch_iter, objective, tok_loss, updater, sched, scaler, dev, lam=0.1):
    clf.train()
    cum_loss, seen = 0.0, 0
    for idx, (tok, valid, classes, per_token_y) in enumerate(batch_iter):
        tok = tok.to(dev)
        valid = valid.to(dev)
        classes = classes.to(dev)
        per_token_y = per_token_y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores, per_token_logits = clf(tok, valid)
        cost = objective(scores.float(), classes)
        cost = cost + lam * tok_loss(per_token_logits.float().flatten(0, 1), per_token_y.flatten())
        scaler.scale(cost / ACCUMULATE).backward()
        if (idx + 1) % ACCUMULATE == 0:
            scaler.unscale_(updater)
            nn.utils.clip_grad_norm_(clf.parameters(), GRAD_CLIP)
            scaler.step(updater)
            scaler.update()
            updater.zero_grad(set_to_none=True)
            sched.step()
        cum_loss += cost.item() * len(classes)
        seen += len(classes)
    return cum_loss / seen


def collate_batch(batch):
    samples, targets = zip(*batch)
    ids = pad_sequence(samples, batch_first=True, padding_value=PAD_ID)
    mask = ids != PAD_ID
    tok_targets = torch.where(mask, 1 + ids % AUX_CLASSES, PAD_ID)
    return ids, mask, torch.stack(targets), tok_targets


if __name__ == "__main__":
    entry()
