"""A PyTorch training script."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

K = 4
DIM = 16


def run() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    cli.add_argument("--epochs", type=int, default=3)
    cli.add_argument("--seed", type=int, default=0)
    common = cli.parse_args()
    cuda = (common.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dev = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(common.seed + rank)
    training_set = synth_data(1024, random_seed=1)
    valid_set = synth_data(512, random_seed=2)
    batch_sampler = DistributedSampler(training_set, shuffle=True, seed=common.seed)
    train_batches = DataLoader(training_set, batch_size=64, sampler=batch_sampler, drop_last=True)
    val_batches = DataLoader(valid_set, batch_size=128, sampler=DistributedSampler(valid_set, shuffle=False))
    learner = DistributedDataParallel(TwoPathMLP().to(dev), device_ids=[local_rank] if cuda else None)
    updater = torch.optim.SGD(learner.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(common.seed)

    for e in range(common.epochs):
        batch_sampler.set_epoch(e)
        fit_epoch(learner, train_batches, updater, generator, dev)
        accuracy = validate(learner, val_batches, dev)
        if rank == 0:
            print(f"epoch {e}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(learner.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


@torch.no_grad()
def validate(clf, dl, target_device) -> float:
    clf.eval()
    freq = torch.zeros(2, device=target_device)
    for batch_x, yb in dl:
        batch_x = batch_x.to(target_device)
        yb = yb.to(target_device)
        freq[0] += (clf(batch_x).argmax(1) == yb).sum()
        freq[1] += len(yb)
    dist.all_reduce(freq, op=dist.ReduceOp.SUM)
    return (freq[0] / freq[1]).item()


def synth_data(count: int, random_seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(random_seed)
    centers = torch.randn(2 * K, DIM, generator=torch.Generator().manual_seed(0))
    group = torch.randint(0, 2 * K, (count,), generator=gen)
    inputs = centers[group] + torch.randn(count, DIM, generator=gen)
    return TensorDataset(inputs, group % K)


class TwoPathMLP(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, K))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def fit_epoch(network, batches, optim_, generator, where) -> None:
    network.train()
    for features, targets in batches:
        features = noise(features, generator).to(where)
        targets = targets.to(where)
        optim_.zero_grad(set_to_none=True)
        batch_loss = F.cross_entropy(network(features), targets)
        batch_loss.backward()
        optim_.step()


def noise(xb: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return xb + scale * torch.randn(xb.shape, generator=generator)


if __name__ == "__main__":
    run()
