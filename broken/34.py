"""Fit a sequence model (a transformer encoder and a GRU over embedded tokens, masked mean pooling, an auxiliary per-token head) that tells which marker token occurs most often, and report validation accuracy."""
import argparse
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

PAD_IDX = 0
N_MARKERS = 4
VOCAB_SIZE = 32
NUM_BUCKETS = 3
SHORTEST = 4
LEN_MAX = 24
BATCH = 32
GRAD_ACCUM = 2
CLIP = 0.5
MAX_EPOCHS = 3
SPLIT_EPOCH = 1


def setup(dev, base_lr, num_steps, n_warmup):
    net = TokenClassifier().to(dev)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [probs for probs in net.parameters() if probs.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=base_lr)

    def lr_lambda(step: int) -> float:
        if step < n_warmup:
            return (step + 1) / n_warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - n_warmup) / max(1, num_steps - n_warmup))))

    lr_schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    scaler = torch.amp.GradScaler(dev.type)
    return net, opt, lr_schedule, scaler


def cli_main() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = resolve_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_data = VarLenSequences(*make_examples(512, random_seed=1))
    valid_set = VarLenSequences(*make_examples(256, random_seed=2))
    grouper = BucketBatchSampler([len(s) for s in train_data.seqs], BATCH, seed=0)
    train_dl = DataLoader(train_data, batch_sampler=grouper, collate_fn=collate_batch)
    valid_dl = DataLoader(valid_set, batch_size=128, collate_fn=collate_batch)
    learning_rate = 6e-3
    max_steps = MAX_EPOCHS * len(train_dl) // GRAD_ACCUM
    shared = (grouper, train_dl, valid_dl, device)

    model, optimizer, scheduler, scaler = setup(device, learning_rate, max_steps, n_warmup=max_steps // 10)
    do_epochs(range(SPLIT_EPOCH), model, optimizer, scheduler, scaler, *shared)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SPLIT_EPOCH * len(train_dl) // GRAD_ACCUM}, "text.pt")

    model, optimizer, scheduler, scaler = setup(device, learning_rate, max_steps, n_warmup=max_steps // 10)
    ckpt = torch.load("text.pt", weights_only=True)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    scaler.load_state_dict(ckpt["scaler"])
    do_epochs(range(SPLIT_EPOCH, MAX_EPOCHS), model, optimizer, scheduler, scaler, *shared)


def resolve_device(wanted: str | None) -> torch.device:
    kind = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(kind)


def fit_epoch(network, dl, loss_function, aux_criterion, optim_, schedule, scaler, target_device, aux_weight=0.1):
    network.train()
    loss_sum, n_examples = 0.0, 0
    for index, (input_ids, is_real, targets, per_token_y) in enumerate(dl):
        input_ids, is_real = input_ids.to(target_device), is_real.to(target_device)
        targets = targets.to(target_device)
        per_token_y = per_token_y.to(target_device)
        with torch.autocast(target_device.type, dtype=torch.bfloat16, enabled=target_device.type == "cuda"):
            raw, per_token_logits = network(input_ids, is_real)
        cost = loss_function(raw.float(), targets)
        cost = cost + aux_weight * aux_criterion(per_token_logits.float().flatten(0, 1), per_token_y.flatten())
        scaler.scale(cost / GRAD_ACCUM).backward()
        if (index + 1) % GRAD_ACCUM == 0:
            scaler.unscale_(optim_)
            nn.utils.clip_grad_norm_(network.parameters(), CLIP)
            scaler.step(optim_)
            scaler.update()
            optim_.zero_grad(set_to_none=True)
            schedule.step()
        loss_sum += cost.item() * len(targets)
        n_examples += len(targets)
    return loss_sum / n_examples


def do_epochs(max_epochs, clf, updater, sched, scaler, bucket_sampler, training_data, holdout, device):
    objective = nn.CrossEntropyLoss()
    tok_loss = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    for ep in max_epochs:
        bucket_sampler.set_epoch(ep)
        tr_loss = fit_epoch(clf, training_data, objective, tok_loss, updater, sched,
                                     scaler, device)
        eval_loss, score = score_model(clf, holdout, objective, device)
        print(f"epoch {ep}  train {tr_loss:.4f}  val {eval_loss:.4f}  acc {score:.3f}  "
              f"lr {sched.get_last_lr()[0]:.2e}")


class BucketBatchSampler:
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
            window_ids = sorted(perm[start:start + chunk_size], key=lambda i: self.lengths[i])
            batch_list += [window_ids[idx:idx + self.batch_size] for idx in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=gen).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def make_examples(count: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    rng = torch.Generator().manual_seed(random_seed)
    seq_lens = torch.randint(SHORTEST, LEN_MAX + 1, (count,), generator=rng)
    y_true = torch.randint(0, N_MARKERS, (count,), generator=rng)
    lead = (seq_lens // 4).clamp(min=2)
    tallies = (torch.rand(count, N_MARKERS, generator=rng) * lead[:, None]).long()
    tallies[torch.arange(count), y_true] = lead
    samples = []
    for length, row in zip(seq_lens.tolist(), tallies):
        signal = torch.repeat_interleave(torch.arange(1, N_MARKERS + 1), row)[:length]
        noise = torch.randint(N_MARKERS + 1, VOCAB_SIZE, (length - len(signal),), generator=rng)
        samples.append(torch.cat([signal, noise])[torch.randperm(length, generator=rng)])
    return samples, y_true


def collate_batch(batch):
    items, classes = zip(*batch)
    tok = torch.stack([torch.nn.functional.pad(seq, (0, LEN_MAX - len(seq)), value=PAD_IDX) for seq in items])
    mask = tok != PAD_IDX
    aux_targets = torch.where(mask, 1 + tok % NUM_BUCKETS, PAD_IDX)
    return tok, mask, torch.stack(classes), aux_targets


class TokenClassifier(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(LEN_MAX, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, N_MARKERS)
        self.token_head = nn.Linear(d, NUM_BUCKETS + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        feats = self.embed(tokens) + self.pos[: tokens.shape[1]]
        feats = self.encoder(feats, src_key_padding_mask=~keep)
        scores, _ = self.gru(feats.transpose(0, 1))
        feats = feats + scores.transpose(0, 1)
        sent_vec = (feats * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(sent_vec), self.token_head(feats)


class VarLenSequences(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


@torch.no_grad()
def score_model(learner, batch_iter, loss_fn, device):
    learner.eval()
    cum_loss, n_correct, seen = 0.0, 0, 0
    for ids, valid, labels, _ in batch_iter:
        ids, valid, labels = ids.to(device), valid.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = learner(ids, valid)
        cum_loss += loss_fn(z.float(), labels).item() * len(labels)
        n_correct += (z.argmax(1) == labels).sum().item()
        seen += len(labels)
    return cum_loss / seen, n_correct / seen


if __name__ == "__main__":
    cli_main()
