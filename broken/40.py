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
D_IN = 16


def noise_scale(xb: torch.Tensor, generator: torch.Generator, scale: float = 0.2) -> torch.Tensor:
    return xb + scale * torch.randn(xb.shape, generator=generator)


def cli_main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--device", help="cpu or cuda (default: $KATA_DEVICE, else cpu)")
    cli.add_argument("--epochs", type=int, default=3)
    cli.add_argument("--seed", type=int, default=0)
    shared = cli.parse_args()
    cuda = (shared.device or os.environ.get("KATA_DEVICE", "cpu")) == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, local_rank = dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dev = torch.device(f"cuda:{local_rank}" if cuda else "cpu")

    torch.manual_seed(shared.seed + rank)
    train_ds = sample_points(1024, s=1)
    valid_set = sample_points(512, s=2)
    batch_sampler = DistributedSampler(train_ds, shuffle=True, seed=shared.seed)
    train_dl = DataLoader(train_ds, batch_size=64, sampler=batch_sampler, drop_last=True)
    valid_dl = DataLoader(valid_set, batch_size=128, sampler=DistributedSampler(valid_set, shuffle=False))
    network = DistributedDataParallel(BranchNet().to(dev), device_ids=[local_rank] if cuda else None)
    optim_ = torch.optim.SGD(network.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(shared.seed + rank)

    for epoch_idx in range(shared.epochs):
        batch_sampler.set_epoch(epoch_idx)
        train_epoch(network, train_dl, optim_, generator, dev)
        accuracy = eval_model(network, valid_dl, dev)
        if rank == 0:
            print(f"epoch {epoch_idx}  val accuracy {accuracy:.4f}")

    if rank == 0:
        torch.save(network.module.state_dict(), "ddp.pt")
    dist.barrier()
    dist.destroy_process_group()


def sample_points(total: int, s: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(s)
    anchors = torch.randn(2 * CLASSES, D_IN, generator=torch.Generator().manual_seed(0))
    blob = torch.randint(0, 2 * CLASSES, (total,), generator=gen)
    batch_x = anchors[blob] + torch.randn(total, D_IN, generator=gen)
    return TensorDataset(batch_x, blob % CLASSES)


@torch.no_grad()
def eval_model(clf, batch_iter, where) -> float:
    clf.train(False)
    freq = torch.zeros(2, device=where)
    for inputs, labels in batch_iter:
        inputs = inputs.to(where)
        labels = labels.to(where)
        freq[0] += (clf(inputs).argmax(1) == labels).sum()
        freq[1] += len(labels)
    dist.all_reduce(freq, op=dist.ReduceOp.SUM)
    return (freq[0] / freq[1]).item()


class BranchNet(nn.Module):
    def __init__(self, hidden: int = 64, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D_IN, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Dropout(dropout), nn.Linear(hidden, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train_epoch(learner, dl, opt, generator, target_device) -> None:
    learner.train()
    for features, targets in dl:
        features = noise_scale(features, generator).to(target_device)
        targets = targets.to(target_device)
        opt.zero_grad(set_to_none=True)
        cost = F.cross_entropy(learner.module(features), targets)
        cost.backward()
        opt.step()


if __name__ == "__main__":
    cli_main()
