"""Train a small classifier on variable-length token sequences padded per batch."""
import argparse
import math
import os

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_IDX = 0
N_MARKERS = 4
V = 32
N_BUCKETS = 3
SHORTEST, LEN_MAX = 4, 24
MICRO_BATCH = 32
ACCUMULATE = 2
CLIP_NORM = 0.5
MAX_EPOCHS = 3
SPLIT_EPOCH = 1


class BucketBatchSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=gen).tolist()
        chunk_size = 8 * self.batch_size
        batch_list = []
        for start in range(0, len(shuffled), chunk_size):
            window_ids = sorted(shuffled[start:start + chunk_size], key=lambda i: self.lengths[i])
            batch_list += [window_ids[idx:idx + self.batch_size] for idx in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=gen).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def pad_collate(batch):
    samples, classes = zip(*batch)
    ids = pad_sequence(samples, batch_first=True, padding_value=PAD_IDX)
    is_real = ids != PAD_IDX
    aux_targets = torch.where(is_real, 1 + ids % N_BUCKETS, PAD_IDX)
    return ids, is_real, torch.stack(classes), aux_targets


def setup(dev, learning_rate, num_steps, n_warmup):
    clf = HybridEncoder().to(dev)
    decay = [prob for prob in clf.parameters() if prob.dim() >= 2]
    no_decay = [probs for probs in clf.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=learning_rate)

    def lr_lambda(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warmup) / max(1, num_steps - n_warmup))))

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    scaler = torch.amp.GradScaler(dev.type)
    return clf, opt, schedule, scaler


def resolve_device(choice: str | None) -> torch.device:
    kind = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


class HybridEncoder(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(V, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(LEN_MAX, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, N_MARKERS)
        self.token_head = nn.Linear(d, N_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        hidden = self.embed(tokens) + self.pos[: tokens.shape[1]]
        hidden = self.encoder(hidden, src_key_padding_mask=~keep)
        outputs, _ = self.gru(hidden.transpose(0, 1))
        hidden = hidden + outputs.transpose(0, 1)
        summary = (hidden * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(summary), self.token_head(hidden)


def fit_epoch(learner, batch_iter, loss_function, token_loss_fn, updater, lr_schedule, scaler, target_device, token_weight=0.1):
    learner.train()
    cum_loss = 0.0
    count = 0
    for k, (tok, mask, y_true, tok_targets) in enumerate(batch_iter):
        tok = tok.to(target_device)
        mask = mask.to(target_device)
        y_true, tok_targets = y_true.to(target_device), tok_targets.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            z, tok_logits = learner(tok, mask)
        cost = loss_function(z.float(), y_true)
        cost = cost + token_weight * token_loss_fn(tok_logits.float().flatten(0, 1), tok_targets.flatten())
        scaler.scale(cost / ACCUMULATE).backward()
        if (k + 1) % ACCUMULATE == 0:
            scaler.unscale_(updater)
            nn.utils.clip_grad_norm_(learner.parameters(), CLIP_NORM)
            scaler.step(updater)
            scaler.update()
            updater.zero_grad(set_to_none=True)
        lr_schedule.step()
        cum_loss += cost.item() * len(y_true)
        count += len(y_true)
    return cum_loss / count


def synth_sequences(total: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    rng = torch.Generator().manual_seed(rng_seed)
    lens = torch.randint(SHORTEST, LEN_MAX + 1, (total,), generator=rng)
    targets = torch.randint(0, N_MARKERS, (total,), generator=rng)
    winner_count = (lens // 4).clamp(min=2)
    tallies = (torch.rand(total, N_MARKERS, generator=rng) * winner_count[:, None]).long()
    tallies[torch.arange(total), targets] = winner_count
    items = []
    for length, row in zip(lens.tolist(), tallies):
        signal = torch.repeat_interleave(torch.arange(1, N_MARKERS + 1), row)[:length]
        rest = torch.randint(N_MARKERS + 1, V, (length - len(signal),), generator=rng)
        items.append(torch.cat([signal, rest])[torch.randperm(length, generator=rng)])
    return items, targets


def train_epochs(num_epochs, net, optim_, sched, scaler, bucket_sampler, train_batches, valid_dl, device):
    loss_fn = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    for epoch_idx in num_epochs:
        bucket_sampler.set_epoch(epoch_idx)
        tr_loss = fit_epoch(net, train_batches, loss_fn, aux_criterion, optim_, sched,
                                     scaler, device)
        holdout_loss, accuracy = eval_model(net, valid_dl, loss_fn, device)
        print(f"epoch {epoch_idx}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {accuracy:.3f}  "
              f"lr {sched.get_last_lr()[0]:.2e}")


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    training_set = SeqDataset(*synth_sequences(512, rng_seed=1))
    val_data = SeqDataset(*synth_sequences(256, rng_seed=2))
    grouper = BucketBatchSampler([len(s) for s in training_set.seqs], MICRO_BATCH, seed=0)
    training_data = DataLoader(training_set, batch_sampler=grouper, collate_fn=pad_collate)
    val_batches = DataLoader(val_data, batch_size=128, collate_fn=pad_collate)
    base_lr = 6e-3
    max_steps = MAX_EPOCHS * len(training_data) // ACCUMULATE
    common = (grouper, training_data, val_batches, device)

    model, optimizer, scheduler, scaler = setup(device, base_lr, max_steps, n_warmup=max_steps // 10)
    train_epochs(range(SPLIT_EPOCH), model, optimizer, scheduler, scaler, *common)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SPLIT_EPOCH * len(training_data) // ACCUMULATE}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, base_lr, max_steps, n_warmup=max_steps // 10)
    saved = torch.load("text.pt", weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    scaler.load_state_dict(saved["scaler"])
    train_epochs(range(SPLIT_EPOCH, MAX_EPOCHS), model, optimizer, scheduler, scaler, *common)


@torch.no_grad()
def eval_model(network, dl, objective, device):
    network.train(False)
    loss_sum = 0.0
    n_correct = 0
    seen = 0
    for input_ids, valid, labels, _ in dl:
        input_ids = input_ids.to(device)
        valid = valid.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            raw, _ = network(input_ids, valid)
        loss_sum += objective(raw.float(), labels).item() * len(labels)
        n_correct += (raw.argmax(1) == labels).sum().item()
        seen += len(labels)
    return loss_sum / seen, n_correct / seen


class SeqDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


if __name__ == "__main__":
    run()
