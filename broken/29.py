"""Fit a sequence model (a transformer encoder and a GRU over embedded tokens, masked mean pooling, an auxiliary per-token head) that tells which marker token occurs most often, and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_TOKEN = 0
K_MARKERS = 4
VOCAB_SIZE = 32
AUX_CLASSES = 3
LEN_MIN, MAX_TOKENS = 4, 24
BS = 32
ACCUM_STEPS = 2
CLIP_NORM = 0.5
MAX_EPOCHS = 3
SPLIT_EPOCH = 1


def sample_sequences(count: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    sizes = torch.randint(LEN_MIN, MAX_TOKENS + 1, (count,), generator=gen)
    classes = torch.randint(0, K_MARKERS, (count,), generator=gen)
    winner_count = (sizes // 4).clamp(min=2)
    n_marks = (torch.rand(count, K_MARKERS, generator=gen) * winner_count[:, None]).long()
    n_marks[torch.arange(count), classes] = winner_count
    items = []
    for length, row in zip(sizes.tolist(), n_marks):
        signal = torch.repeat_interleave(torch.arange(1, K_MARKERS + 1), row)[:length]
        noise = torch.randint(K_MARKERS + 1, VOCAB_SIZE, (length - len(signal),), generator=gen)
        items.append(torch.cat([signal, noise])[torch.randperm(length, generator=gen)])
    return items, classes


def do_epochs(num_epochs, net, opt, schedule, scaler, bucket_sampler, train_dl, holdout, device):
    loss_function = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_TOKEN)
    for ep in num_epochs:
        bucket_sampler.set_epoch(ep)
        epoch_loss = run_epoch(net, train_dl, loss_function, aux_criterion, opt, schedule,
                                     scaler, device)
        va_loss, val_acc = eval_model(net, holdout, loss_function, device)
        print(f"epoch {ep}  train {epoch_loss:.4f}  val {va_loss:.4f}  acc {val_acc:.3f}  "
              f"lr {schedule.get_last_lr()[0]:.2e}")


def entry() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(cli.parse_args().device)
    torch.manual_seed(0)
    train_ds = SeqDataset(*sample_sequences(512, random_seed=1))
    val_ds = SeqDataset(*sample_sequences(256, random_seed=2))
    grouper = SortishSampler([len(s) for s in train_ds.seqs], BS, seed=0)
    train_batches = DataLoader(train_ds, batch_sampler=grouper, collate_fn=pad_collate)
    val_batches = DataLoader(val_ds, batch_size=128, collate_fn=pad_collate)
    learning_rate = 6e-3
    n_steps = MAX_EPOCHS * len(train_batches) // ACCUM_STEPS
    common = (grouper, train_batches, val_batches, device)

    model, optimizer, scheduler, scaler = create_training(device, learning_rate, n_steps, warmup_steps=n_steps // 10)
    do_epochs(range(SPLIT_EPOCH), model, optimizer, scheduler, scaler, *common)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SPLIT_EPOCH * len(train_batches) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = create_training(device, learning_rate, n_steps, warmup_steps=n_steps // 10)
    ckpt = torch.load("text.pt", weights_only=True)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    scaler.load_state_dict(ckpt["scaler"])
    do_epochs(range(SPLIT_EPOCH, MAX_EPOCHS), model, optimizer, scheduler, scaler, *common)


def run_epoch(learner, dl, loss_fn, token_loss_fn, optim_, lr_schedule, scaler, target_device, lam=0.1):
    learner.train()
    running_loss = 0.0
    seen = 0
    for index, (tok, valid, targets, tok_targets) in enumerate(dl):
        tok = tok.to(target_device)
        valid = valid.to(target_device)
        targets = targets.to(target_device)
        tok_targets = tok_targets.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            z, tok_logits = learner(tok, valid)
        err = loss_fn(z.float(), targets)
        err = err + lam * token_loss_fn(tok_logits.float().flatten(0, 1), tok_targets.flatten())
        scaler.scale(err / ACCUM_STEPS).backward()
        if (index + 1) % ACCUM_STEPS == 0:
            nn.utils.clip_grad_norm_(learner.parameters(), CLIP_NORM)
            scaler.step(optim_)
            scaler.update()
            optim_.zero_grad(set_to_none=True)
            lr_schedule.step()
        running_loss += err.item() * len(targets)
        seen += len(targets)
    return running_loss / seen


@torch.no_grad()
def eval_model(clf, batch_iter, objective, device):
    clf.eval()
    loss_sum = 0.0
    hits = 0
    total = 0
    for input_ids, is_real, labels, _ in batch_iter:
        input_ids = input_ids.to(device)
        is_real = is_real.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            scores, _ = clf(input_ids, is_real)
        loss_sum += objective(scores.float(), labels).item() * len(labels)
        hits += (scores.argmax(1) == labels).sum().item()
        total += len(labels)
    return loss_sum / total, hits / total


def create_training(dev, peak_lr, max_steps, warmup_steps):
    network = TokenClassifier().to(dev)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [prob for prob in network.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=peak_lr)

    def warmup_then_cosine(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))))

    sched = torch.optim.lr_scheduler.LambdaLR(updater, warmup_then_cosine)
    scaler = torch.amp.GradScaler(dev.type)
    return network, updater, sched, scaler


class SeqDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def pad_collate(batch):
    samples, y_true = zip(*batch)
    ids = pad_sequence(samples, batch_first=True, padding_value=PAD_TOKEN)
    mask = ids != PAD_TOKEN
    per_token_y = torch.where(mask, 1 + ids % AUX_CLASSES, PAD_TOKEN)
    return ids, mask, torch.stack(y_true), per_token_y


class SortishSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=rng).tolist()
        pool_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(shuffled), pool_size):
            block = sorted(shuffled[start:start + pool_size], key=lambda i: self.lengths[i])
            buckets += [block[k:k + self.batch_size] for k in range(0, len(block), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=rng).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def choose_device(wanted: str | None) -> torch.device:
    label = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, d, padding_idx=PAD_TOKEN)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, K_MARKERS)
        self.token_head = nn.Linear(d, AUX_CLASSES + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        feats = self.embed(tokens) + self.pos[: tokens.shape[1]]
        feats = self.encoder(feats, src_key_padding_mask=~keep)
        outputs, _ = self.gru(feats.transpose(0, 1))
        feats = feats + outputs.transpose(0, 1)
        sent_vec = (feats * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(sent_vec), self.token_head(feats)


if __name__ == "__main__":
    entry()
