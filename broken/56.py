"""Sequence-classification training script: length-grouped batches, mixed precision with gradient accumulation, warm-up + cosine, a mid-run checkpoint and resume."""
import argparse
import math
import os

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

PAD_IDX = 0
NUM_MARKERS = 4
V = 32
AUX_CLASSES = 3
MIN_TOKENS = 4
MAX_TOKENS = 24
BATCH = 32
ACCUM_STEPS = 2
CLIP = 0.5
NUM_EPOCHS = 3
SAVE_AFTER = 1


class SortishSampler:
    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        rng = torch.Generator().manual_seed(self.seed)
        idx_order = torch.randperm(len(self.lengths), generator=rng).tolist()
        window = 8 * self.batch_size
        batch_list = []
        for start in range(0, len(idx_order), window):
            window_ids = sorted(idx_order[start:start + window], key=lambda i: self.lengths[i])
            batch_list += [window_ids[idx:idx + self.batch_size] for idx in range(0, len(window_ids), self.batch_size)]
        for b in torch.randperm(len(batch_list), generator=rng).tolist():
            yield batch_list[b]

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)


def cli_main() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cuda if available)")
    device = get_device(arg_parser.parse_args().device)
    torch.manual_seed(0)
    train_data = TokenDataset(*sample_sequences(512, random_seed=1))
    val_data = TokenDataset(*sample_sequences(256, random_seed=2))
    grouper = SortishSampler([len(s) for s in train_data.seqs], BATCH, seed=0)
    train_batches = DataLoader(train_data, batch_sampler=grouper, collate_fn=collate_batch)
    holdout = DataLoader(val_data, batch_size=128, collate_fn=collate_batch)
    base_lr, max_steps = 6e-3, NUM_EPOCHS * len(train_batches) // ACCUM_STEPS
    data_args = (grouper, train_batches, holdout, device)

    model, optimizer, scheduler, scaler = create_training(device, base_lr, max_steps, warmup_steps=max_steps // 10)
    do_epochs(range(SAVE_AFTER), model, optimizer, scheduler, scaler, *data_args)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "step": SAVE_AFTER * len(train_batches) // ACCUM_STEPS}, "text.pt")

    model, optimizer, scheduler, scaler = create_training(device, base_lr, max_steps, warmup_steps=max_steps // 10)
    saved = torch.load("text.pt", weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    scaler.load_state_dict(saved["scaler"])
    do_epochs(range(SAVE_AFTER, NUM_EPOCHS), model, optimizer, scheduler, scaler, *data_args)


def sample_sequences(count: int, random_seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    gen = torch.Generator().manual_seed(random_seed)
    seq_lens = torch.randint(MIN_TOKENS, MAX_TOKENS + 1, (count,), generator=gen)
    targets = torch.randint(0, NUM_MARKERS, (count,), generator=gen)
    lead = (seq_lens // 4).clamp(min=2)
    freq = (torch.rand(count, NUM_MARKERS, generator=gen) * lead[:, None]).long()
    freq[torch.arange(count), targets] = lead
    samples = []
    for length, row in zip(seq_lens.tolist(), freq):
        signal = torch.repeat_interleave(torch.arange(1, NUM_MARKERS + 1), row)[:length]
        rest = torch.randint(NUM_MARKERS + 1, V, (length - len(signal),), generator=gen)
        samples.append(torch.cat([signal, rest])[torch.randperm(length, generator=gen)])
    return samples, targets


def fit_epoch(network, dl, objective, tok_loss, updater, schedule, scaler, dev, aux_weight=0.1):
    network.train()
    cum_loss, seen = 0.0, 0
    for k, (input_ids, is_real, y_true, per_token_y) in enumerate(dl):
        input_ids, is_real = input_ids.to(dev), is_real.to(dev)
        y_true, per_token_y = y_true.to(dev), per_token_y.to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            raw, tok_logits = network(input_ids, is_real)
        cost = objective(raw.float(), y_true)
        cost = cost + aux_weight * tok_loss(tok_logits.float().flatten(0, 1), per_token_y.flatten())
        scaler.scale(cost / ACCUM_STEPS).backward()
        if (k + 1) % ACCUM_STEPS == 0:
            scaler.unscale_(updater)
            nn.utils.clip_grad_norm_(network.parameters(), CLIP)
            scaler.step(updater)
            scaler.update()
            updater.zero_grad(set_to_none=True)
            schedule.step()
        cum_loss += cost.item() * len(y_true)
        seen += len(y_true)
    return cum_loss / seen


def do_epochs(max_epochs, clf, opt, sched, scaler, bucket_sampler, training_data, valid_dl, device):
    loss_fn = nn.CrossEntropyLoss()
    aux_criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    for ep in max_epochs:
        bucket_sampler.set_epoch(ep)
        fit_loss = fit_epoch(clf, training_data, loss_fn, aux_criterion, opt, sched,
                                     scaler, device)
        eval_loss, score = score_model(clf, valid_dl, loss_fn, device)
        print(f"epoch {ep}  train {fit_loss:.4f}  val {eval_loss:.4f}  acc {score:.3f}  "
              f"lr {sched.get_last_lr()[0]:.2e}")


class TokenDataset(Dataset):
    def __init__(self, seqs: list[torch.Tensor], labels: torch.Tensor):
        self.seqs, self.labels = seqs, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.seqs[i], self.labels[i]


@torch.no_grad()
def score_model(learner, batch_iter, loss_function, device):
    learner.eval()
    loss_sum = 0.0
    hits = 0
    total = 0
    for tok, mask, labels, _ in batch_iter:
        tok, mask, labels = tok.to(device), mask.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits, _ = learner(tok, mask)
        loss_sum += loss_function(logits.float(), labels).item() * len(labels)
        hits += (logits.argmax(1) == labels).sum().item()
        total += len(labels)
    return loss_sum / total, hits / total


def create_training(target_device, peak_lr, n_steps, warmup_steps):
    net = HybridEncoder().to(target_device)
    decay = [q for q in net.parameters() if q.dim() >= 2]
    no_decay = [prob for prob in net.parameters() if prob.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optim_ = torch.optim.AdamW(groups, lr=peak_lr)

    def lr_lambda(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup_steps) / max(1, n_steps - warmup_steps))))

    lr_schedule = torch.optim.lr_scheduler.LambdaLR(optim_, lr_lambda)
    scaler = torch.amp.GradScaler(target_device.type)
    return net, optim_, lr_schedule, scaler


def get_device(wanted: str | None) -> torch.device:
    device_name = wanted or os.environ.get("KATA_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device_name)


def collate_batch(batch):
    items, classes = zip(*batch)
    ids = pad_sequence(items, batch_first=True, padding_value=PAD_IDX)
    valid = ids != PAD_IDX
    tok_targets = torch.where(valid, 1 + ids % AUX_CLASSES, PAD_IDX)
    return ids, valid, torch.stack(classes), tok_targets


class HybridEncoder(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(V, d, padding_idx=PAD_IDX)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.gru = nn.GRU(d, d)
        self.head = nn.Linear(d, NUM_MARKERS)
        self.token_head = nn.Linear(d, AUX_CLASSES + 1)

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor):
        z = self.embed(tokens) + self.pos[: tokens.shape[1]]
        z = self.encoder(z, src_key_padding_mask=~keep)
        scores, _ = self.gru(z.transpose(0, 1))
        z = z + scores.transpose(0, 1)
        summary = (z * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        return self.head(summary), self.token_head(z)


if __name__ == "__main__":
    cli_main()
