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
N_TOKENS = 32
NUM_BUCKETS = 3
LEN_MIN = 4
MAX_TOKENS = 24
BS = 32
ACCUM_STEPS = 2
CLIP_NORM = 0.5
N_EPOCHS = 3
SAVE_AFTER = 1


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(N_TOKENS, d, padding_idx=PAD_TOKEN)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, K_MARKERS)
        self.token_head = nn.Linear(d, NUM_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        feats = self.embed(tokens) + self.pos[: tokens.shape[1]]
        feats = self.encoder(feats)
        outputs, _ = self.gru(feats.transpose(0, 1))
        feats = feats + outputs.transpose(0, 1)
        summary = (feats * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(summary), self.token_head(feats)


def train_epoch(network, dl, objective, token_loss_fn, opt, lr_schedule, scaler, dev, token_weight=0.1):
    network.train()
    running_loss = 0.0
    n_examples = 0
    for index, (ids, is_real, targets, tok_targets) in enumerate(dl):
        ids = ids.to(dev)
        is_real = is_real.to(dev)
        targets = targets.to(dev)
        tok_targets = tok_targets.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            scores, aux_logits = network(ids, is_real)
        batch_loss = objective(scores.float(), targets)
        batch_loss = batch_loss + token_weight * token_loss_fn(aux_logits.float().flatten(0, 1), tok_targets.flatten())
        scaler.scale(batch_loss / ACCUM_STEPS).backward()
        if (index + 1) % ACCUM_STEPS == 0:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(network.parameters(), CLIP_NORM)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            lr_schedule.step()
        running_loss += batch_loss.item() * len(targets)
        n_examples += len(targets)
    return running_loss / n_examples


class VarLenSequences(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


def run() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    training_set = VarLenSequences(*make_examples(512, rng_seed=1))
    val_data = VarLenSequences(*make_examples(256, rng_seed=2))
    grouper = BucketBatchSampler([len(s) for s in training_set.seqs], BS, seed=0)
    train_dl = DataLoader(training_set, batch_sampler=grouper, collate_fn=pad_collate)
    holdout = DataLoader(val_data, batch_size=128, collate_fn=pad_collate)
    learning_rate = 6e-3
    n_steps = N_EPOCHS * len(train_dl) // ACCUM_STEPS
    shared = (grouper, train_dl, holdout, device)

    model, optimizer, scheduler, scaler = setup(device, learning_rate, n_steps, n_warmup=n_steps // 10)
    loop_epochs(range(SAVE_AFTER), model, optimizer, scheduler, scaler, *shared)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SAVE_AFTER * len(train_dl) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, learning_rate, n_steps, n_warmup=n_steps // 10)
    snapshot = torch.load("text.pt", weights_only=True)
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    scheduler.load_state_dict(snapshot["scheduler"])
    scaler.load_state_dict(snapshot["scaler"])
    loop_epochs(range(SAVE_AFTER, N_EPOCHS), model, optimizer, scheduler, scaler, *shared)


def pad_collate(batch):
    sequences, classes = zip(*batch)
    tok = pad_sequence(sequences, batch_first=True, padding_value=PAD_TOKEN)
    mask = tok != PAD_TOKEN
    aux_targets = torch.where(mask, 1 + tok % NUM_BUCKETS, PAD_TOKEN)
    return tok, mask, torch.stack(classes), aux_targets


def loop_epochs(n_epochs, net, optim_, sched, scaler, bucket_sampler, train_batches, valid_dl, device):
    loss_function = nn.CrossEntropyLoss()
    tok_loss = nn.CrossEntropyLoss(ignore_index=PAD_TOKEN)
    for ep in n_epochs:
        bucket_sampler.set_epoch(ep)
        tr_loss = train_epoch(net, train_batches, loss_function, tok_loss, optim_, sched,
                                     scaler, device)
        holdout_loss, val_acc = validate(net, valid_dl, loss_function, device)
        print(f"epoch {ep}  train {tr_loss:.4f}  val {holdout_loss:.4f}  acc {val_acc:.3f}  "
              f"lr {sched.get_last_lr()[0]:.2e}")


@torch.no_grad()
def validate(clf, batch_iter, loss_fn, device):
    clf.eval()
    loss_sum, hits, seen = 0.0, 0, 0
    for input_ids, valid, labels, _ in batch_iter:
        input_ids, valid, labels = input_ids.to(device), valid.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = clf(input_ids, valid)
        loss_sum += loss_fn(z.float(), labels).item() * len(labels)
        hits += (z.argmax(1) == labels).sum().item()
        seen += len(labels)
    return loss_sum / seen, hits / seen


def make_examples(count: int, rng_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(rng_seed)
    sizes = torch.randint(LEN_MIN, MAX_TOKENS + 1, (count,), generator=gen)
    y_true = torch.randint(0, K_MARKERS, (count,), generator=gen)
    lead = (sizes // 4).clamp(min=2)
    n_marks = (torch.rand(count, K_MARKERS, generator=gen) * lead[:, None]).long()
    n_marks[torch.arange(count), y_true] = lead
    samples = []
    for length, row in zip(sizes.tolist(), n_marks):
        signal = torch.repeat_interleave(torch.arange(1, K_MARKERS + 1), row)[:length]
        noise = torch.randint(K_MARKERS + 1, N_TOKENS, (length - len(signal),), generator=gen)
        samples.append(torch.cat([signal, noise])[torch.randperm(length, generator=gen)])
    return samples, y_true


def resolve_device(asked: str | None) -> torch.device:
    kind = asked or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def setup(target_device, peak_lr, num_steps, n_warmup):
    learner = TokenClassifier().to(target_device)
    decay = [prob for prob in learner.parameters() if prob.dim() >= 2]
    no_decay = [q for q in learner.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    updater = torch.optim.AdamW(groups, lr=peak_lr)

    def schedule_fn(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warmup) / max(1, num_steps - n_warmup))))

    schedule = torch.optim.lr_scheduler.LambdaLR(updater, schedule_fn)
    scaler = torch.amp.GradScaler(target_device.type)
    return learner, updater, schedule, scaler


class BucketBatchSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed + self.epoch)
        idx_order = torch.randperm(len(self.lengths), generator=rng).tolist()
        chunk_size = 8 * self.batch_size
        buckets = []
        for start in range(0, len(idx_order), chunk_size):
            window_ids = sorted(idx_order[start:start + chunk_size], key=lambda i: self.lengths[i])
            buckets += [window_ids[idx:idx + self.batch_size] for idx in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(buckets), generator=rng).tolist():
            yield buckets[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


if __name__ == "__main__":
    run()
