"""A PyTorch training script."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N_CLASSES, DIM = 4, 16


def fit_epoch(learner, batches, optim_, generator, where) -> None:
    learner.train()
    for xb, yb in batches:
        xb = noise(xb, generator).to(where)
        yb = yb.to(where)
        optim_.zero_grad(set_to_none=True)
        err = F.cross_entropy(learner(xb), yb)
        err.backward()
        optim_.step()


def noise(batch_x: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return batch_x + scale * torch.randn(batch_x.shape, generator=generator)


def synth_data(total: int, rng_seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(rng_seed)
    anchors = torch.randn(2 * N_CLASSES, DIM, generator=torch.Generator().manual_seed(0))
    group = torch.randint(0, 2 * N_CLASSES, (total,), generator=gen)
    inputs = anchors[group] + torch.randn(total, DIM, generator=gen)
    return TensorDataset(inputs, group % N_CLASSES)


@torch.no_grad()
def eval_model(network, dl, target_device) -> float:
    network.eval()
    tallies = torch.zeros(2, device=target_device)
    for features, batch_y in dl:
        features = features.to(target_device)
        batch_y = batch_y.to(target_device)
        tallies[0] += (network(features).argmax(1) == batch_y).sum()
        tallies[1] += len(batch_y)
    dist.all_reduce(tallies, op=dist.ReduceOp.SUM)
    return (tallies[0] / tallies[1]).item()


class BranchNet(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DIM, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, N_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def cli_main() -> None:
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
    train_data = synth_data(1024, rng_seed=1)
    val_ds = synth_data(512, rng_seed=2)
    batch_sampler = DistributedSampler(train_data, shuffle=True, seed=common.seed)
    train_dl = DataLoader(train_data, batch_size=64, sampler=batch_sampler, drop_last=True)
    val_batches = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))
    clf = DistributedDataParallel(BranchNet().to(dev), device_ids=[local_rank] if cuda else None)
    updater = torch.optim.SGD(clf.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(common.seed + rank)

    for ep in range(common.epochs):
        batch_sampler.set_epoch(ep)
        fit_epoch(clf, train_dl, updater, generator, dev)
        accuracy = eval_model(clf, val_batches, dev)
        if rank == 0:
            print(f"epoch {ep}  val accuracy {accuracy:.4f}")

    torch.save(clf.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    cli_main()
