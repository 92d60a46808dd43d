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
N_FEATURES = 16


def make_dataset(seen: int, s: int) -> TensorDataset:
    rng = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * K, N_FEATURES, generator=torch.Generator().manual_seed(0))
    group = torch.randint(0, 2 * K, (seen,), generator=rng)
    batch_x = anchors[group] + torch.randn(seen, N_FEATURES, generator=rng)
    return TensorDataset(batch_x, group % K)


def train_epoch(network, batches, optim_, generator, dev) -> None:
    network.train()
    for xb, batch_y in batches:
        xb = noise(xb, generator).to(dev)
        batch_y = batch_y.to(dev)
        optim_.zero_grad(set_to_none=True)
        cost = F.cross_entropy(network(xb), batch_y)
        cost.backward()
        optim_.step()


def entry() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    shared = ap.parse_args()
    cuda = (shared.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    where = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(shared.seed + rank)
    train_data = make_dataset(1024, s=1)
    val_data = make_dataset(512, s=2)
    grouper = DistributedSampler(train_data, shuffle=True, seed=shared.seed)
    train_dl = DataLoader(train_data, batch_size=64, shuffle=True, drop_last=True)
    holdout = DataLoader(val_data, batch_size=128, sampler=DistributedSampler(val_data, shuffle=False))
    learner = DistributedDataParallel(BranchNet().to(where), device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(learner.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(shared.seed + rank)

    for ep in range(shared.epochs):
        grouper.set_epoch(ep)
        train_epoch(learner, train_dl, opt, generator, where)
        accuracy = score_model(learner, holdout, where)
        if rank == 0:
            print(f"epoch {ep}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(learner.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


def noise(features: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return features + scale * torch.randn(features.shape, generator=generator)


@torch.no_grad()
def score_model(clf, batch_iter, target_device) -> float:
    clf.train(False)
    tallies = torch.zeros(2, device=target_device)
    for inputs, targets in batch_iter:
        inputs = inputs.to(target_device)
        targets = targets.to(target_device)
        tallies[0] += (clf(inputs).argmax(1) == targets).sum()
        tallies[1] += len(targets)
    dist.all_reduce(tallies, op=dist.ReduceOp.SUM)
    return (tallies[0] / tallies[1]).item()


class BranchNet(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, K))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


if __name__ == "__main__":
    entry()
