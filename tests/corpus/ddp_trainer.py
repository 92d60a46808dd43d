# expect:
"""Imitates the Trainer-class shape of a research codebase's distributed train.py: a @dataclass config, the
process group set up from the launcher's environment (RANK / LOCAL_RANK / WORLD_SIZE, env://), nanoGPT-style
`seed_offset = rank` seeding, a Trainer holding the DDP-wrapped model, its optimizer and its DistributedSampler,
gradient accumulation with `no_sync()` on all but the last micro-batch, a per-step OneCycle schedule, validation
counts summed over ranks, and a checkpoint written by the main process only. A small CNN
on synthetic 8x8 "images" of bars (3 classes). Launch with `torchrun --standalone --nproc-per-node 2`."""
import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@dataclass
class TrainConfig:
    epochs: int = 3
    batch_size: int = 32  # per rank, per optimizer step (split into micro-batches)
    grad_accum_steps: int = 2
    eval_batch_size: int = 128
    lr: float = 1e-2
    weight_decay: float = 0.05
    noise_std: float = 0.2  # augmentation: additive pixel noise
    n_train: int = 1024
    n_val: int = 256
    data_seed: int = 2024
    sampler_seed: int = 0
    out_dir: str = "out"


def build_dataset(n: int, seed: int) -> TensorDataset:
    """Noisy 8x8 images of a horizontal bar (0), a vertical bar (1) or a diagonal (2); one seed, so every rank
    builds the very same set."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=g)
    where = torch.randint(0, 8, (n,), generator=g)
    images = torch.zeros(n, 1, 8, 8)
    rows = torch.arange(8)
    for i in range(n):
        k, c = labels[i].item(), where[i].item()
        if k == 0:
            images[i, 0, c, :] = 1.0
        elif k == 1:
            images[i, 0, :, c] = 1.0
        else:
            images[i, 0, rows, (rows + c) % 8] = 1.0
    images += 0.5 * torch.randn(images.shape, generator=g)
    return TensorDataset(images, labels)


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 3, width: int = 16, dropout: float = 0.2):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(width * 16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def augment(x: torch.Tensor, noise_std: float) -> torch.Tensor:
    return x + noise_std * torch.randn_like(x)


class Trainer:
    def __init__(self, cfg: TrainConfig, rank: int, world_size: int):
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.is_main = rank == 0
        self.device = torch.device("cpu")

        train_set = build_dataset(cfg.n_train, cfg.data_seed)
        val_set = build_dataset(cfg.n_val, cfg.data_seed + 1)
        self.train_sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True,
                                                seed=cfg.sampler_seed)
        self.train_loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=self.train_sampler,
                                       drop_last=True)
        val_sampler = DistributedSampler(val_set, num_replicas=world_size, rank=rank, shuffle=False)
        self.val_loader = DataLoader(val_set, batch_size=cfg.eval_batch_size, sampler=val_sampler)

        self.model = DDP(SmallCNN().to(self.device))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
            self.optimizer, max_lr=cfg.lr, total_steps=cfg.epochs * len(self.train_loader), pct_start=0.25)

    def _micro_step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        logits = self.model(x)
        loss = F.cross_entropy(logits, y) / self.cfg.grad_accum_steps
        loss.backward()
        return loss.item()

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        total, steps = 0.0, 0
        for x, y in self.train_loader:
            x, y = augment(x, self.cfg.noise_std).to(self.device), y.to(self.device)
            micro_batches = list(zip(x.chunk(self.cfg.grad_accum_steps), y.chunk(self.cfg.grad_accum_steps)))
            for xb, yb in micro_batches[:-1]:
                with self.model.no_sync():  # accumulate locally, no all-reduce yet
                    total += self._micro_step(xb, yb)
            total += self._micro_step(*micro_batches[-1])  # this backward all-reduces the summed gradients
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            steps += 1
        mean_loss = torch.tensor([total / max(steps, 1)])
        dist.all_reduce(mean_loss)
        return mean_loss.item() / self.world_size

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        correct, seen = 0, 0
        for x, y in self.val_loader:
            x, y = x.to(self.device), y.to(self.device)
            preds = self.model(x).argmax(dim=1)
            correct += (preds == y).sum().item()
            seen += y.numel()
        stats = torch.tensor([correct, seen], dtype=torch.long)
        torch.distributed.all_reduce(stats)  # summed over ranks
        correct, seen = stats.tolist()
        return correct / seen

    def save_checkpoint(self, path: str) -> None:
        if self.is_main:
            torch.save({"model": self.model.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "config": asdict(self.cfg)}, path)

    def fit(self, epochs: int) -> None:
        best = 0.0
        for epoch in range(epochs):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            val_acc = self.evaluate()
            if self.is_main:
                print(f"epoch {epoch} train_loss={train_loss:.4f} time={time.time() - t0:.2f}s val_acc={val_acc:.4f}")
            if val_acc > best:
                best = val_acc
                self.save_checkpoint(os.path.join(self.cfg.out_dir, "best.pt"))
            dist.barrier()  # every rank, every epoch: none runs ahead while the checkpoint is written
        self.save_checkpoint(os.path.join(self.cfg.out_dir, "last.pt"))
        dist.barrier()


def main() -> None:
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend="gloo", init_method="env://", rank=rank, world_size=world_size)

    seed_offset = rank  # each rank its own dropout masks and noise
    torch.manual_seed(1337 + seed_offset)
    torch.set_num_threads(1)

    cfg = TrainConfig()
    os.makedirs(cfg.out_dir, exist_ok=True)
    if local_rank == 0:
        print(f"world_size={world_size} config={asdict(cfg)}")
    trainer = Trainer(cfg, rank, world_size)
    trainer.fit(cfg.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
