"""A PyTorch training script."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N_CLASSES = 4
D_IN = 16


def sample_points(total: int, random_seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(random_seed)
    means = torch.randn(2 * N_CLASSES, D_IN, generator=torch.Generator().manual_seed(0))
    group = torch.randint(0, 2 * N_CLASSES, (total,), generator=gen)
    features = means[group] + torch.randn(total, D_IN, generator=gen)
    return TensorDataset(features, group % N_CLASSES)


def fit_epoch(clf, dl, optim_, generator, where) -> None:
    clf.train()
    for inputs, yb in dl:
        inputs = noise_scale(inputs, generator).to(where)
        yb = yb.to(where)
        optim_.zero_grad(set_to_none=True)
        err = F.cross_entropy(clf(inputs), yb)
        err.backward()
        optim_.step()


@torch.no_grad()
def validate(learner, batch_iter, dev) -> float:
    learner.eval()
    tallies = torch.zeros(2, device=dev)
    for xb, targets in batch_iter:
        xb, targets = xb.to(dev), targets.to(dev)
        tallies[0] += (learner(xb).argmax(1) == targets).sum()
        tallies[1] += len(targets)
    dist.all_reduce(tallies, op=dist.ReduceOp.SUM)
    return (tallies[0] / tallies[1]).item()


class Net(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D_IN, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, N_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def noise_scale(batch_x: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return batch_x + scale * torch.randn(batch_x.shape, generator=generator)


def cli_main() -> None:
    arg_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg_parser.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    arg_parser.add_argument("--epochs", type=int, default=3)
    arg_parser.add_argument("--seed", type=int, default=0)
    common = arg_parser.parse_args()
    cuda = (common.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    target_device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(common.seed + rank)
    train_data = sample_points(1024, random_seed=1)
    val_data = sample_points(512, random_seed=2)
    batch_sampler = DistributedSampler(train_data, shuffle=True, seed=common.seed)
    training_data = DataLoader(train_data, batch_size=64, sampler=batch_sampler, drop_last=True)
    valid_dl = DataLoader(val_data, batch_size=128, sampler=DistributedSampler(val_data, shuffle=False))
    network = DistributedDataParallel(Net().to(target_device), device_ids=[local_rank] if cuda else None)
    updater = torch.optim.SGD(network.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(common.seed + rank)

    for epoch_idx in range(common.epochs):
        fit_epoch(network, training_data, updater, generator, target_device)
        accuracy = validate(network, valid_dl, target_device)
        if rank == 0:
            print(f"epoch {epoch_idx}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(network.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    cli_main()
