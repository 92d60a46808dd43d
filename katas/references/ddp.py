"""A correct data-parallel PyTorch training script: one small classifier trained by several processes.

Each process (a rank) holds a replica of the model wrapped in DistributedDataParallel,
which averages the gradients of all ranks in every backward pass, so the replicas stay
equal. A DistributedSampler gives each rank its own shard of the training set, shuffled
anew every epoch through `set_epoch`; each rank jitters its inputs with its own random
stream; validation counts are summed over all ranks before the accuracy is printed; only
rank 0 writes the checkpoint. Run it with `torchrun --standalone --nproc-per-node 2
reference/ddp.py` (gloo on CPU; with `--device cuda`, nccl and one GPU per rank).
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

NUM_CLASSES, NUM_FEATURES = 4, 16


def make_data(n: int, seed: int) -> TensorDataset:
    """Overlapping Gaussian clusters, two per class: the same set on every rank (one seed)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(2 * NUM_CLASSES, NUM_FEATURES, generator=torch.Generator().manual_seed(0))
    cluster = torch.randint(0, 2 * NUM_CLASSES, (n,), generator=g)
    x = centres[cluster] + torch.randn(n, NUM_FEATURES, generator=g)
    return TensorDataset(x, cluster % NUM_CLASSES)


class Classifier(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(NUM_FEATURES, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, NUM_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def jitter(x: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    """Augmentation: Gaussian noise from the rank's own generator."""
    return x + scale * torch.randn(x.shape, generator=generator)


def train_one_epoch(model, loader, optimizer, generator, device) -> None:
    model.train()
    for x, y in loader:
        x, y = jitter(x, generator).to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader, device) -> float:
    """Accuracy over the whole validation set: each rank scores its shard, the counts are summed over ranks."""
    model.eval()
    counts = torch.zeros(2, device=device)  # correct, seen
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        counts[0] += (model(x).argmax(1) == y).sum()
        counts[1] += len(y)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    return (counts[0] / counts[1]).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cuda = (args.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from the launcher
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(args.seed + rank)  # each rank its own dropout masks; DDP copies rank 0's initial weights
    train_set, val_set = make_data(1024, seed=1), make_data(512, seed=2)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=64, sampler=sampler, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=128, sampler=DistributedSampler(val_set, shuffle=False))
    model = DistributedDataParallel(Classifier().to(device), device_ids=[local_rank] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(args.seed + rank)  # each rank jitters with its own stream

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle (and new shards) every epoch
        train_one_epoch(model, train_loader, optimizer, generator, device)
        accuracy = evaluate(model, val_loader, device)
        if rank == 0:
            print(f"epoch {epoch}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(model.module.state_dict(), "ddp.pt")
    dist.barrier()  # no rank leaves before the checkpoint is written
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
