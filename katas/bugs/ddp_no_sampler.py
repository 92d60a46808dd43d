"""ddp-no-sampler: the training DataLoader shuffles the whole dataset on every rank instead of dealing each rank a
shard."""
from __future__ import annotations

import libcst as cst

from katas.bugs.ddp_set_epoch import distributed_loaders, keyword, samplers
from katas.bugs.no_grouping import dataset_of, sampler_call
from katas.bugs.no_shuffle import holders, iterated_by, training_loops
from katas.bugs.worker_seed import drop_unused_imports, without_arg
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite


class ShuffleEverything(Operator):
    """Replace ``sampler=DistributedSampler(...)`` (or a name or ``self`` attribute holding one) of a DataLoader by
    ``shuffle=True``; a sampler kept in a variable stays built (its ``set_epoch`` still runs). Loaders a training
    loop iterates are the sites; when none is found that way, every loader with a shuffling DistributedSampler is
    one, marked as a guess. Not a loader whose sampler the script reaches as ``loader.sampler`` (its
    ``set_epoch`` would fail on the loader's own sampler)."""

    no_site = "no DataLoader draws from a DistributedSampler"

    def loaders(self, ctx: Context) -> list[tuple[cst.Call, cst.Arg]]:
        reached = [c.func.value.value for c in ctx.calls(ctx.module, "set_epoch")
                   if isinstance(c.func.value, cst.Attribute) and c.func.value.attr.value == "sampler"]
        return [(call, arg) for call, arg in distributed_loaders(ctx, samplers(ctx))
                if not any(ctx.binding(r) in holders(ctx, call) for r in reached)]

    def sites(self, ctx: Context) -> list[Site]:
        found = self.loaders(ctx)
        loops = training_loops(ctx)
        trained = [(call, arg) for call, arg in found if iterated_by(ctx, call, loops)]
        if not trained:
            found = [(call, arg) for call, arg in found if not shuffles_not(sampler_call(ctx, arg.value))]
        return [Site(f"ddp-no-sampler:{ctx.where(call)}:DataLoader({dataset_of(ctx, call)})", arg, guessed=not trained)
                for call, arg in trained or found]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        arg = site.node
        call = ctx.parents[arg]
        shuffle = cst.parse_expression("f(shuffle=True)").args[0].with_changes(comma=arg.comma)
        flag = keyword(call, "shuffle")

        def edit(node: cst.Call) -> cst.Call:
            args = [shuffle if original is arg else new for original, new in zip(call.args, node.args)]
            node = node.with_changes(args=args)
            return without_arg(node, call.args.index(flag)) if flag is not None else node

        return drop_unused_imports(ctx.module, rewrite(ctx.module, {call: edit}))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=64, sampler=sampler, drop_last=True)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
""",
            after="""\
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
"""), Example(
            before="""\
import torch
from torch.utils.data.distributed import DistributedSampler

loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=False, sampler=DistributedSampler(data))
for x, y in loader:
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""",
            after="""\
import torch

loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
for x, y in loader:
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""")]


def shuffles_not(sampler: cst.Call | None) -> bool:
    """A sampler built with ``shuffle=False``: an evaluation's."""
    flag = keyword(sampler, "shuffle") if sampler is not None else None
    return flag is not None and isinstance(flag.value, cst.Name) and flag.value.value == "False"


BUG = Bug(
    id="ddp-no-sampler",
    title="Every rank trains on the whole dataset",
    difficulty="medium",
    observe=("Under `torchrun --nproc-per-node 2` each epoch takes as long as the same script run on one process, "
             "and the printed accuracies follow the one-process run almost number for number: the second process "
             "buys nothing."),
    hints=(
        "Print `len(train_loader)` on each rank, with one process and with two. What should it be with two?",
        "Which samples does each rank see in an epoch? Log the first indices of each rank's first batch.",
        "Who decides which part of the training set each rank reads? Look at how the training DataLoader is built.",
    ),
    why=("A shuffled DataLoader iterates the whole dataset on every rank. Every rank does a full epoch of work, "
         "so adding processes does not shorten an epoch, and the ranks' batches overlap at random (or coincide, "
         "when the ranks seed their generators alike): each epoch goes through every sample once per rank, and "
         "N processes do the work of one process with an N times larger batch, duplicated samples included."),
    fix=("Give the training DataLoader `sampler=DistributedSampler(train_set, shuffle=True)` (and no "
         "`shuffle=True`), and call `sampler.set_epoch(epoch)` every epoch; or hand each rank a disjoint subset "
         "that is reshuffled every epoch."),
    probes=("rank-shards",),
    follow_up=(
        "Why is `shuffle=True` forbidden together with `sampler=` on a DataLoader?",
        "Each rank could shuffle with a seed of its own. Why would that still not give the ranks disjoint data?",
        "How does a DistributedSampler make the shards equal in size, and what does that do to a few samples?",
    ),
    operator=ShuffleEverything(),
)
