"""Train a small classifier on variable-length token sequences padded per batch."""
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
N_BUCKETS = 3
LEN_MIN, LEN_MAX = 4, 24
BATCH = 32
ACCUM_STEPS = 2
CLIP = 0.5
MAX_EPOCHS = 3
SAVE_AFTER = 1


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, d, padding_idx=PAD_TOKEN)
        self.pos = nn.Parameter(torch.randn(LEN_MAX, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, K_MARKERS)
        self.token_head = nn.Linear(d, N_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        preds, _ = self.gru(z.transpose(0, 1))
        z = z + preds.transpose(0, 1)
        summary = z.mean(dim=1)
        return self.head(summary), self.token_head(z)


def fit_epoch(clf, dl, loss_fn, tok_loss, optim_, sched, scaler, dev, token_weight=0.1):
    clf.train()
    loss_sum, n_examples = 0.0, 0
    for idx, (ids, valid, y_true, per_token_y) in enumerate(dl):
        ids, valid = ids.to(dev), valid.to(dev)
        y_true, per_token_y = y_true.to(dev), per_token_y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores, per_token_logits = clf(ids, valid)
        batch_loss = loss_fn(scores.float(), y_true)
        batch_loss = batch_loss + token_weight * tok_loss(per_token_logits.float().flatten(0, 1), per_token_y.flatten())
        scaler.scale(batch_loss / ACCUM_STEPS).backward()
        if (idx + 1) % ACCUM_STEPS == 0:
            scaler.unscale_(optim_)
            nn.utils.clip_grad_norm_(clf.parameters(), CLIP)
            scaler.step(optim_)
            scaler.update()
            optim_.zero_grad(set_to_none=True)
            sched.step()
        loss_sum += batch_loss.item() * len(y_true)
        n_examples += len(y_true)
    return loss_sum / n_examples


def make_run(target_device, learning_rate, n_steps, ramp_steps):
    net = TokenClassifier().to(target_device)
    decay = [prob for prob in net.parameters() if prob.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=learning_rate)

    def warmup_then_cosine(step: int) -> float:
        if step < ramp_steps:
            return (step + 1) / ramp_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - ramp_steps) / max(1, n_steps - ramp_steps))))

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, warmup_then_cosine)
    scaler = torch.amp.GradScaler(target_device.type)
    return net, opt, schedule, scaler


class VarLenSequences(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


@torch.no_grad()
def eval_model(network, batch_iter, objective, device):
    network.eval()
    cum_loss = 0.0
    n_correct = 0
    total = 0
    for input_ids, mask, labels, _ in batch_iter:
        input_ids = input_ids.to(device)
        mask = mask.to(device)
        labels = labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            raw, _ = network(input_ids, mask)
        cum_loss += objective(raw.float(), labels).item() * len(labels)
        n_correct += (raw.argmax(1) == labels).sum().item()
        total += len(labels)
    return cum_loss / total, n_correct / total


class SortishSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        shuffled = torch.randperm(len(self.lengths), generator=gen).tolist()
        pool_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(shuffled), pool_size):
            window_ids = sorted(shuffled[start:start + pool_size], key=lambda i: self.lengths[i])
            buckets += [window_ids[k:k + self.batch_size] for k in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=gen).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def make_examples(seen: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    rng = torch.Generator().manual_seed(rng_seed)
    seq_lens = torch.randint(LEN_MIN, LEN_MAX + 1, (seen,), generator=rng)
    classes = torch.randint(0, K_MARKERS, (seen,), generator=rng)
    top_count = (seq_lens // 4).clamp(min=2)
    n_marks = (torch.rand(seen, K_MARKERS, generator=rng) * top_count[:, None]).long()
    n_marks[torch.arange(seen), classes] = top_count
    items = []
    for length, row in zip(seq_lens.tolist(), n_marks):
        signal = torch.repeat_interleave(torch.arange(1, K_MARKERS + 1), row)[:length]
        padding_tokens = torch.randint(K_MARKERS + 1, VOCAB_SIZE, (length - len(signal),), generator=rng)
        items.append(torch.cat([signal, padding_tokens])[torch.randperm(length, generator=rng)])
    return items, classes


def do_epochs(n_epochs, learner, updater, lr_schedule, scaler, bucket_sampler, training_data, holdout, device):
    loss_function = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_TOKEN)
    for e in n_epochs:
        bucket_sampler.set_epoch(e)
        tr_loss = fit_epoch(learner, training_data, loss_function, aux_criterion, updater, lr_schedule,
                                     scaler, device)
        va_loss, score = eval_model(learner, holdout, loss_function, device)
        print(f"epoch {e}  train {tr_loss:.4f}  val {va_loss:.4f}  acc {score:.3f}  "
              f"lr {lr_schedule.get_last_lr()[0]:.2e}")


def choose_device(choice: str | None) -> torch.device:
    label = choice or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(label)


def cli_main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = choose_device(cli.parse_args().device)
    torch.manual_seed(0)
    train_data = VarLenSequences(*make_examples(512, rng_seed=1))
    valid_set = VarLenSequences(*make_examples(256, rng_seed=2))
    grouper = SortishSampler([len(s) for s in train_data.seqs], BATCH, seed=0)
    train_batches = DataLoader(train_data, batch_sampler=grouper, collate_fn=pad_collate)
    val_batches = DataLoader(valid_set, batch_size=128, collate_fn=pad_collate)
    base_lr = 6e-3
    max_steps = MAX_EPOCHS * len(train_batches) // ACCUM_STEPS
    shared = (grouper, train_batches, val_batches, device)

    model, optimizer, scheduler, scaler = make_run(device, base_lr, max_steps, ramp_steps=max_steps // 10)
    do_epochs(range(SAVE_AFTER), model, optimizer, scheduler, scaler, *shared)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SAVE_AFTER * len(train_batches) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = make_run(device, base_lr, max_steps, ramp_steps=max_steps // 10)
    saved = torch.load("text.pt", weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    scaler.load_state_dict(saved["scaler"])
    do_epochs(range(SAVE_AFTER, MAX_EPOCHS), model, optimizer, scheduler, scaler, *shared)


def pad_collate(batch):
    samples, targets = zip(*batch)
    tok = pad_sequence(samples, batch_first=True, padding_value=PAD_TOKEN)
    is_real = tok != PAD_TOKEN
    aux_targets = torch.where(is_real, 1 + tok % N_BUCKETS, PAD_TOKEN)
    return tok, is_real, torch.stack(targets), aux_targets


if __name__ == "__main__":
    cli_main()
