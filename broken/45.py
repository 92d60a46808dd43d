"""Sequence-classification training script: length-grouped batches, mixed precision with gradient accumulation, warm-up + cosine, a mid-run checkpoint and resume."""
import argparse
import math
import os

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_TOKEN = 0
N_MARKERS = 4
VOCAB_SIZE = 32
NUM_BUCKETS = 3
LEN_MIN, LEN_MAX = 4, 24
BS = 32
GRAD_ACCUM = 2
GRAD_CLIP = 0.5
NUM_EPOCHS = 3
SAVE_AFTER = 1


def loop_epochs(n_epochs, network, opt, schedule, scaler, bucket_sampler, training_data, valid_dl, device):
    loss_function = nn.CrossEntropyLoss()
    token_loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_TOKEN)
    for epoch_idx in n_epochs:
        bucket_sampler.set_epoch(epoch_idx)
        fit_loss = train_epoch(network, training_data, loss_function, token_loss_fn, opt, schedule,
                                     scaler, device)
        va_loss, val_acc = eval_model(network, valid_dl, loss_function, device)
        print(f"epoch {epoch_idx}  train {fit_loss:.4f}  val {va_loss:.4f}  acc {val_acc:.3f}  "
              f"lr {schedule.get_last_lr()[0]:.2e}")


def train_epoch(net, batch_iter, objective, aux_criterion, optim_, lr_schedule, scaler, dev, lam=0.1):
    net.train()
    running_loss, seen = 0.0, 0
    for idx, (input_ids, is_real, classes, tok_targets) in enumerate(batch_iter):
        input_ids, is_real = input_ids.to(dev), is_real.to(dev)
        classes = classes.to(dev)
        tok_targets = tok_targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            raw, per_token_logits = net(input_ids, is_real)
        batch_loss = objective(raw.float(), classes)
        batch_loss = batch_loss + lam * aux_criterion(per_token_logits.float().flatten(0, 1), tok_targets.flatten())
        scaler.scale(batch_loss / GRAD_ACCUM).backward()
        if (idx + 1) % GRAD_ACCUM == 0:
            scaler.unscale_(optim_)
            nn.utils.clip_grad_norm_(net.parameters(), GRAD_CLIP)
            scaler.step(optim_)
            scaler.update()
            optim_.zero_grad(set_to_none=True)
            lr_schedule.step()
        running_loss += batch_loss.item() * len(classes)
        seen += len(classes)
    return running_loss / seen


def choose_device(asked: str | None) -> torch.device:
    kind = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class TokenDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def synth_sequences(count: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    sizes = torch.randint(LEN_MIN, LEN_MAX + 1, (count,), generator=gen)
    targets = torch.randint(0, N_MARKERS, (count,), generator=gen)
    lead = (sizes // 4).clamp(min=2)
    n_marks = (torch.rand(count, N_MARKERS, generator=gen) * lead[:, None]).long()
    n_marks[torch.arange(count), targets] = lead
    samples = []
    for length, row in zip(sizes.tolist(), n_marks):
        marks = torch.repeat_interleave(torch.arange(1, N_MARKERS + 1), row)[:length]
        padding_tokens = torch.randint(N_MARKERS + 1, VOCAB_SIZE, (length - len(marks),), generator=gen)
        samples.append(torch.cat([marks, padding_tokens])[torch.randperm(length, generator=gen)])
    return samples, targets


def setup(target_device, learning_rate, num_steps, n_warmup):
    learner = TokenClassifier().to(target_device)
    decay = [probs for probs in learner.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in learner.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=learning_rate)

    def warmup_then_cosine(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warmup) / max(1, num_steps - n_warmup))))

    sched = torch.optim.lr_scheduler.LambdaLR(updater, warmup_then_cosine)
    scaler = torch.amp.GradScaler(target_device.type)
    return learner, updater, sched, scaler


@torch.no_grad()
def eval_model(clf, dl, loss_fn, device):
    clf.eval()
    loss_sum = 0.0
    n_correct = 0
    total = 0
    for tok, valid, labels, _ in dl:
        tok, valid, labels = tok.to(device), valid.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            scores, _ = clf(tok, valid)
        loss_sum += loss_fn(scores.float(), labels).item() * len(labels)
        n_correct += (scores.argmax(1) == labels).sum().item()
        total += len(labels)
    return loss_sum / total, n_correct / total


def run() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(cli.parse_args().device)
    torch.manual_seed(0)
    train_ds = TokenDataset(*synth_sequences(512, random_seed=1))
    valid_set = TokenDataset(*synth_sequences(512, random_seed=1))
    grouper = LengthBucketSampler([len(s) for s in train_ds.seqs], BS, seed=0)
    train_dl = DataLoader(train_ds, batch_sampler=grouper, collate_fn=pad_collate)
    val_batches = DataLoader(valid_set, batch_size=128, collate_fn=pad_collate)
    peak_lr, n_steps = 6e-3, NUM_EPOCHS * len(train_dl) // GRAD_ACCUM
    common = (grouper, train_dl, val_batches, device)

    model, optimizer, scheduler, scaler = setup(device, peak_lr, n_steps, n_warmup=n_steps // 10)
    loop_epochs(range(SAVE_AFTER), model, optimizer, scheduler, scaler, *common)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SAVE_AFTER * len(train_dl) // GRAD_ACCUM}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, peak_lr, n_steps, n_warmup=n_steps // 10)
    ckpt = torch.load("text.pt", weights_only=True)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    scaler.load_state_dict(ckpt["scaler"])
    loop_epochs(range(SAVE_AFTER, NUM_EPOCHS), model, optimizer, scheduler, scaler, *common)


def pad_collate(batch):
    items, y_true = zip(*batch)
    ids = pad_sequence(items, batch_first=True, padding_value=PAD_TOKEN)
    mask = ids != PAD_TOKEN
    aux_targets = torch.where(mask, 1 + ids % NUM_BUCKETS, PAD_TOKEN)
    return ids, mask, torch.stack(y_true), aux_targets


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, d, padding_idx=PAD_TOKEN)
        self.pos = nn.Parameter(torch.randn(LEN_MAX, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, N_MARKERS)
        self.token_head = nn.Linear(d, NUM_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        outputs, _ = self.gru(z.transpose(0, 1))
        z = z + outputs.transpose(0, 1)
        sent_vec = (z * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(sent_vec), self.token_head(z)


class LengthBucketSampler:
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
            window_ids = sorted(shuffled[start:start + chunk_size], key=lambda i: self.lengths[i])
            batch_list += [window_ids[k:k + self.batch_size] for k in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=rng).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


if __name__ == "__main__":
    run()
