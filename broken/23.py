"""Fit a sequence model (a transformer encoder and a GRU over embedded tokens, masked mean pooling, an auxiliary per-token head) that tells which marker token occurs most often, and report validation accuracy."""
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
N_BUCKETS = 3
LEN_MIN, LONGEST = 4, 24
BS = 32
ACCUMULATE = 2
CLIP_NORM = 0.5
NUM_EPOCHS = 3
CKPT_EPOCH = 1


def collate_batch(batch):
    sequences, targets = zip(*batch)
    ids = pad_sequence(sequences, batch_first=True, padding_value=PAD_IDX)
    valid = ids != PAD_IDX
    tok_targets = torch.where(valid, 1 + ids % N_BUCKETS, PAD_IDX)
    return ids, valid, torch.stack(targets), tok_targets


def train_epochs(max_epochs, net, updater, lr_schedule, scaler, bucket_sampler, train_dl, val_batches, device):
    objective = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss()
    for ep in max_epochs:
        bucket_sampler.set_epoch(ep)
        fit_loss = train_epoch(net, train_dl, objective, aux_criterion, updater, lr_schedule,
                                     scaler, device)
        holdout_loss, score = eval_model(net, val_batches, objective, device)
        print(f"epoch {ep}  train {fit_loss:.4f}  val {holdout_loss:.4f}  acc {score:.3f}  "
              f"lr {lr_schedule.get_last_lr()[0]:.2e}")


@torch.no_grad()
def eval_model(learner, dl, loss_function, device):
    learner.train(False)
    running_loss = 0.0
    n_correct = 0
    seen = 0
    for input_ids, mask, labels, _ in dl:
        input_ids = input_ids.to(device)
        mask = mask.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits, _ = learner(input_ids, mask)
        running_loss += loss_function(logits.float(), labels).item() * len(labels)
        n_correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    return running_loss / seen, n_correct / seen


def make_examples(total: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    lens = torch.randint(LEN_MIN, LONGEST + 1, (total,), generator=gen)
    y_true = torch.randint(0, NUM_MARKERS, (total,), generator=gen)
    top_count = (lens // 4).clamp(min=2)
    tallies = (torch.rand(total, NUM_MARKERS, generator=gen) * top_count[:, None]).long()
    tallies[torch.arange(total), y_true] = top_count
    samples = []
    for length, row in zip(lens.tolist(), tallies):
        marker_ids = torch.repeat_interleave(torch.arange(1, NUM_MARKERS + 1), row)[:length]
        padding_tokens = torch.randint(NUM_MARKERS + 1, N_TOKENS, (length - len(marker_ids),), generator=gen)
        samples.append(torch.cat([marker_ids, padding_tokens])[torch.randperm(length, generator=gen)])
    return samples, y_true


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    training_set = TokenDataset(*make_examples(512, rng_seed=1))
    val_ds = TokenDataset(*make_examples(256, rng_seed=2))
    grouper = SortishSampler([len(s) for s in training_set.seqs], BS, seed=0)
    train_batches = DataLoader(training_set, batch_sampler=grouper, collate_fn=collate_batch)
    valid_dl = DataLoader(val_ds, batch_size=128, collate_fn=collate_batch)
    learning_rate, n_steps = 6e-3, NUM_EPOCHS * len(train_batches) // ACCUMULATE
    data_args = (grouper, train_batches, valid_dl, device)

    model, optimizer, scheduler, scaler = setup(device, learning_rate, n_steps, warmup_steps=n_steps // 10)
    train_epochs(range(CKPT_EPOCH), model, optimizer, scheduler, scaler, *data_args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": CKPT_EPOCH * len(train_batches) // ACCUMULATE}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, learning_rate, n_steps, warmup_steps=n_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    scheduler.load_state_dict(snapshot["scheduler"])
    scaler.load_state_dict(snapshot["scaler"])
    train_epochs(range(CKPT_EPOCH, NUM_EPOCHS), model, optimizer, scheduler, scaler, *data_args)


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(N_TOKENS, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(LONGEST, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, NUM_MARKERS)
        self.token_head = nn.Linear(d, N_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        scores, _ = self.gru(z.transpose(0, 1))
        z = z + scores.transpose(0, 1)
        mean_h = (z * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(mean_h), self.token_head(z)


class SortishSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed + self.epoch)
        perm = torch.randperm(len(self.lengths), generator=rng).tolist()
        chunk_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(perm), chunk_size):
            window_ids = sorted(perm[start:start + chunk_size], key=lambda i: self.lengths[i])
            buckets += [window_ids[index:index + self.batch_size] for index in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=rng).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


class TokenDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def train_epoch(clf, batch_iter, loss_fn, token_loss_fn, opt, schedule, scaler, dev, token_weight=0.1):
    clf.train()
    cum_loss = 0.0
    n_examples = 0
    for k, (tok, is_real, classes, aux_targets) in enumerate(batch_iter):
        tok, is_real = tok.to(dev), is_real.to(dev)
        classes, aux_targets = classes.to(dev), aux_targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            raw, aux_logits = clf(tok, is_real)
        cost = loss_fn(raw.float(), classes)
        cost = cost + token_weight * token_loss_fn(aux_logits.float().flatten(0, 1), aux_targets.flatten())
        scaler.scale(cost / ACCUMULATE).backward()
        if (k + 1) % ACCUMULATE == 0:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(clf.parameters(), CLIP_NORM)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            schedule.step()
        cum_loss += cost.item() * len(classes)
        n_examples += len(classes)
    return cum_loss / n_examples


def setup(target_device, peak_lr, num_steps, warmup_steps):
    network = TokenClassifier().to(target_device)
    decay = [probs for probs in network.parameters() if probs.dim() >= 2]
    no_decay = [q for q in network.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=peak_lr)

    def lr_lambda(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / max(1, num_steps - warmup_steps))))

    sched = torch.optim.lr_scheduler.LambdaLR(optim_, lr_lambda)
    scaler = torch.amp.GradScaler(target_device.type)
    return network, optim_, sched, scaler


def resolve_device(asked: str | None) -> torch.device:
    kind = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


if __name__ == "__main__":
    run()
