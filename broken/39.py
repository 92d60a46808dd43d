"""A PyTorch training script."""
import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CLASSES = 4
N_FEATURES = 16


def noise_scale(batch_x: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return batch_x + scale * torch.randn(batch_x.shape, generator=generator)


def make_dataset(seen: int, s: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(s)
    means = torch.randn(2 * CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(0))
    group = torch.randint(0, 2 * CLASSES, (seen,), generator=gen)
    xb = means[group] + torch.randn(seen, N_FEATURES, generator=gen)
    return TensorDataset(xb, group % CLASSES)


class BranchNet(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@torch.no_grad()
def eval_model(learner, batches, dev) -> float:
    learner.train(False)
    tallies = torch.zeros(2, device=dev)
    for inputs, batch_y in batches:
        inputs = inputs.to(dev)
        batch_y = batch_y.to(dev)
        tallies[0] += (learner(inputs).argmax(1) == batch_y).sum()
        tallies[1] += len(batch_y)
    return (tallies[0] / tallies[1]).item()


def cli_main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    cli.add_argument("--epochs", type=int, default=3)
    cli.add_argument("--seed", type=int, default=0)
    data_args = cli.parse_args()
    cuda = (data_args.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    target_device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(data_args.seed + rank)
    training_set = make_dataset(1024, s=1)
    valid_set = make_dataset(512, s=2)
    batch_sampler = DistributedSampler(training_set, shuffle=True, seed=data_args.seed)
    training_data = DataLoader(training_set, batch_size=64, sampler=batch_sampler, drop_last=True)
    valid_dl = DataLoader(valid_set, batch_size=128, sampler=DistributedSampler(valid_set, shuffle=False))
    clf = DistributedDataParallel(BranchNet().to(target_device), device_ids=[local_rank] if cuda else None)
    optim_ = torch.optim.SGD(clf.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(data_args.seed + rank)

    for epoch_idx in range(data_args.epochs):
        batch_sampler.set_epoch(epoch_idx)
        run_epoch(clf, training_data, optim_, generator, target_device)
        accuracy = eval_model(clf, valid_dl, target_device)
        if rank == 0:
            print(f"epoch {epoch_idx}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(clf.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


def run_epoch(network, batch_iter, opt, generator, where) -> None:
    network.train()
    for features, yb in batch_iter:
        features = noise_scale(features, generator).to(where)
        yb = yb.to(where)
        opt.zero_grad(set_to_none=True)
        err = F.cross_entropy(network(features), yb)
        err.backward()
        opt.step()


if __name__ == "__main__":
    cli_main()
