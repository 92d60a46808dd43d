"""rank-shards: in data-parallel training, each rank trains on its own part of the data, a new part every epoch.

Every rank of a data-parallel job runs the same loop; what makes it data-parallel
is that each draws different samples. A ``DistributedSampler`` splits every epoch's
permutation into one disjoint shard per rank; its ``set_epoch(epoch)`` seeds that
permutation, so without it every epoch repeats the first one's shards in the same
order. A plain ``shuffle=True`` loader makes every rank train on the whole set:
each epoch is then ``world`` epochs' worth of the same samples, averaged.

Observed. In each rank, the indices every training DataLoader's sampler drew in
each trained pass (as :mod:`checker.probes.epoch_order` defines them), in order,
kept in full (up to 200,000 per pass, 8 passes), mapped through any ``Subset`` to the
dataset it reads (each rank's ``Subset`` of one dataset is a shard of it). The i-th training pass of each
rank over a dataset of the same class and size is compared with the others'.

Rule. The probe fails when, in some pass, more distinct indices were drawn by two
or more ranks than the padding allows (a ``DistributedSampler`` repeats fewer than
``world`` indices to even out the shards): at most ``max(world, 1 %)`` of the
dataset; or when, with two passes or more, every rank drew exactly the same
indices in the same order in every pass as in the one before. It passes when the
shards are disjoint and change. It reports how much of the dataset the shards
cover together.

Why a correct script does not fail. A ``DistributedSampler`` with ``set_epoch``,
or a split of the indices by rank (``Subset(data, range(rank, n, world))``)
shuffled anew each epoch, draws disjoint shards that change order. Not
applicable: one process; no DataLoader fed training on some rank (batches sliced
by rank from tensors), or an ``IterableDataset`` (no indices).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.distributed import launched
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "rank-shards"
TITLE = "disjoint shards, new every epoch"
SYMPTOM_ID, SYMPTOM = "rank-samples", "the samples each rank trains on, epoch by epoch"
MAX_PASSES = 8
MIN_INDICES = 10


@dataclass
class Observation:
    passes: list[dict] = field(default_factory=list)  # per trained pass: {"dataset", "size", "indices"}
    loaders: bool = False  # some DataLoader fed training


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        if not launched():
            return Observation()
        session = self.session
        train = session.training_loaders()
        trained = {f.pass_index for f in session.forwards if f.reached}
        passes = []
        for p in session.passes:
            loader = p.ref() if p.loader in train and p.ref is not None else None
            if loader is None or p.order is None or p.order.drawn is None or not (p.index in trained or p.updates):
                continue
            dataset, indices = underlying(loader.dataset, p.order.drawn)
            try:
                size = len(dataset)
            except TypeError:
                continue
            passes.append({"dataset": type(dataset).__name__, "size": size, "indices": indices})
            if len(passes) == MAX_PASSES:
                break
        return Observation(passes, bool(train))


def underlying(dataset, indices: list) -> tuple:
    """The dataset a chain of ``Subset`` s reads, and ``indices`` mapped into it: each rank's own ``Subset`` of one
    dataset is a shard of that dataset."""
    from torch.utils.data import Subset

    while isinstance(dataset, Subset):
        try:
            indices = [dataset.indices[i] for i in indices]
        except (IndexError, TypeError):
            break
        dataset = dataset.dataset
    return dataset, [int(i) if hasattr(i, "__index__") else i for i in indices]


def judge(obs: Observation, facts: RunFacts) -> Finding:
    return Finding(ID, TITLE, NOT_APPLICABLE, message="one process: there are no ranks to compare")


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    world = len(observations)
    if not all(o.passes for o in observations):
        why = ("a rank's training read no DataLoader with a sampler (batches made another way, or an IterableDataset):"
               " there are no sample indices to compare across ranks")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why)
    count = min(len(o.passes) for o in observations)
    rows = [[o.passes[i] for o in observations] for i in range(count)]
    rows = [row for row in rows if len({(p["dataset"], p["size"]) for p in row}) == 1]
    if not rows or sum(len(p["indices"]) for p in rows[0]) < MIN_INDICES:
        return Finding(ID, TITLE, CANNOT_TELL, message="the ranks' training passes could not be paired, or drew too "
                                                       "few indices to compare")
    for epoch, row in enumerate(rows):
        size = row[0]["size"]
        seen: dict = {}
        for rank, p in enumerate(row):
            for index in set(p["indices"]):
                seen[index] = seen.get(index, 0) + 1
        shared = sum(1 for n in seen.values() if n > 1)
        if shared > max(world, 0.01 * size):
            text = (f"in training pass {epoch + 1}, {shared} of the {size} samples of {row[0]['dataset']} were drawn "
                    f"by more than one rank (the {world} ranks drew {len(seen)} distinct samples together)")
            return Finding(ID, TITLE, FAIL, f"{shared} samples on several ranks", f"≤ {max(world, int(0.01 * size))}",
                           f"{text}: the ranks train on the same data, so each epoch repeats it {world} times over "
                           "instead of splitting it. Give each rank its own shard (a DistributedSampler)", observed=text)
    repeated = len(rows) >= 2 and all(a[r]["indices"] == b[r]["indices"] for a, b in zip(rows, rows[1:])
                                      for r in range(world))
    if repeated:
        text = (f"each rank drew exactly the same samples, in the same order, in all {len(rows)} training passes "
                f"over {rows[0][0]['dataset']}")
        return Finding(ID, TITLE, FAIL, f"{len(rows) - 1} of {len(rows) - 1} epochs repeated", "0",
                       f"{text}: every epoch replays the first epoch's shards. A DistributedSampler draws a new "
                       "permutation only when told the epoch (sampler.set_epoch(epoch) before each epoch)", observed=text)
    covered = len({i for p in rows[0] for i in p["indices"]}) / max(1, rows[0][0]["size"])
    text = (f"the {world} ranks drew disjoint samples in each of {len(rows)} training passes, covering "
            f"{covered:.0%} of the dataset in the first, and new shards each epoch" if len(rows) >= 2 else
            f"the {world} ranks drew disjoint samples, covering {covered:.0%} of the dataset")
    return Finding(ID, TITLE, PASS, "disjoint", "disjoint", text, observed=text)
