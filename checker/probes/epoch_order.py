"""epoch-order: every epoch visits the training data in a new order.

A DataLoader draws each epoch's indices from its sampler. Drawn in the same order
every epoch, the model sees the same batches, built of the same items, in the same
sequence: the gradient noise that averages out over epochs repeats instead, and
whatever order the data were stored in (sorted by class, by source, by length)
biases every epoch the same way.

Observed. The indices each training DataLoader's sampler (or batch sampler)
yields, recorded by :mod:`checker.instrument` for every pass as a hash of the
whole order plus its first index batches; the data themselves are never read. Only
trained passes count, those whose batches fed a forward that a backward pass
reached (or an update applied): a peek at the first batch, or an evaluation pass
over the training set, is not an epoch. Passes are grouped by the dataset they read
(one group per dataset object, so a DataLoader built anew each epoch over the same
dataset is compared with its predecessors) and each pass is compared with the one
before it. Two passes have the same order when they drew the same number of
indices and their hashes agree, or, when one stopped early (a ``break``), when
their first index batches agree.

Rule. A group *fails* when it has at least two comparable passes and every pass
repeats the order of the one before it. A pass is comparable when the compared
indices number at least 10: a random order of n items repeats by chance with
probability 1/n!, below 3e-7 for n = 10, and sampling with replacement repeats
even less often. The probe passes when every group's passes all differ from their
predecessors; it cannot tell when some repeat and some do not, or when the passes
are too short to compare.

Why a correct script does not fail. ``shuffle=True`` (a ``RandomSampler``), an
explicit ``RandomSampler`` with its own generator, ``WeightedRandomSampler`` and
``RandomSampler(replacement=True)``, a ``DistributedSampler`` whose ``set_epoch``
is called, and a custom sampler that draws a new permutation each epoch all give
a new order in every pass. Only loaders whose batches are trained on are judged
(see :meth:`checker.session.Session.training_loaders`): a validation loader keeps
its order, correctly. A permutation drawn once before training (``Subset(data,
perm)``, ``sampler=perm.tolist()``, a pre-shuffled copy read in sequence) is a
fixed order and fails: the order is the same in every epoch.

Not applicable when no DataLoader fed training (batches sliced from tensors),
when the training loader reads an ``IterableDataset`` (no sampler, no index
order), or when each training dataset was read in a single pass (one epoch: the
order cannot repeat). Not caught: a dataset rebuilt each epoch (a new ``Subset``
over a new permutation, or over the same one) is a new group each time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "epoch-order"
TITLE = "a new order every epoch"
SYMPTOM_ID, SYMPTOM = "batch-order", "the order of training batches across epochs"
MIN_INDICES = 10  # compared indices for a repeat to mean a fixed order: 1/10! < 3e-7 by chance


@dataclass
class Observation:
    # per training dataset: {"dataset": its class, "sampler": the class of what drew its indices, "passes": trained
    # passes that drew indices, "items": indices in its first pass, "compared": pairs of passes compared, "repeated": of those,
    # pairs in the same order}
    datasets: list[dict] = field(default_factory=list)
    unordered: list[str] = field(default_factory=list)  # training datasets read without a sampler (IterableDataset)
    loaders: bool = False  # some DataLoader fed training


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        from torch.utils.data import IterableDataset

        train = self.session.training_loaders()
        trained = {f.pass_index for f in self.session.forwards if f.reached}  # passes a backward pass reached
        groups: dict[int, dict] = {}
        unordered: dict[str, None] = {}
        for p in self.session.passes:
            loader = p.ref() if p.loader in train and p.ref is not None else None
            if loader is None:
                continue
            if isinstance(loader.dataset, IterableDataset):
                unordered.setdefault(type(loader.dataset).__name__, None)
                continue
            if p.order is None or not p.order.indices or not (p.index in trained or p.updates):
                continue  # a peek at the first batch, or an evaluation pass over the training set, is not an epoch
            group = groups.setdefault(id(loader.dataset), {"dataset": type(loader.dataset).__name__,
                                                           "sampler": sampler_name(loader), "orders": []})
            group["orders"].append(p.order)
        return Observation([summarise(g) for g in groups.values()], list(unordered), bool(train))


def sampler_name(loader) -> str:
    sampler = loader.sampler if loader.batch_sampler is None or type(loader.batch_sampler).__name__ == "BatchSampler" \
        else loader.batch_sampler
    return type(sampler).__name__


def same_order(a, b) -> bool | None:
    """Whether two passes drew the same indices in the same order; None when too few were compared."""
    if a.batches == b.batches and a.indices == b.indices:
        return a.digest == b.digest if a.indices >= MIN_INDICES else None
    m = min(len(a.head), len(b.head))
    if sum(len(batch) for batch in a.head[:m]) < MIN_INDICES:
        return None
    return a.head[:m] == b.head[:m]


def summarise(group: dict) -> dict:
    orders = group["orders"]
    verdicts = [same_order(a, b) for a, b in zip(orders, orders[1:])]
    compared = [v for v in verdicts if v is not None]
    return {"dataset": group["dataset"], "sampler": group["sampler"], "passes": len(orders),
            "items": orders[0].indices, "compared": len(compared), "repeated": sum(compared)}


def judge(obs: Observation, facts: RunFacts) -> Finding:
    datasets = [d for d in obs.datasets if d["passes"] >= 2]
    if not datasets:
        if obs.datasets:
            why = "each training dataset was read in one pass (one epoch): its order cannot repeat"
        elif obs.unordered:
            why = (f"training read an IterableDataset ({', '.join(obs.unordered)}), which streams its items "
                   "without a sampler: there is no index order to compare")
        elif obs.loaders:
            why = "the training DataLoader drew no indices from a sampler"
        else:
            why = "no DataLoader fed training (batches were made another way): there is no sampler order to compare"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why)
    fixed = [d for d in datasets if d["compared"] and d["repeated"] == d["compared"]]
    if fixed:
        d = fixed[0]
        seen = (f"the training batches of {d['dataset']} came in the same order in all {d['passes']} passes over its "
                f"{d['items']} items")
        return Finding(ID, TITLE, FAIL, f"{d['repeated']} of {d['compared']} epochs repeated", "0",
                       f"{seen}: its sampler ({d['sampler']}) yields one fixed order, so every epoch replays the same "
                       "batches in the same sequence. " + ("A DistributedSampler draws a new permutation only when told "
                       "the epoch: call sampler.set_epoch(epoch) before each epoch" if d["sampler"] == "DistributedSampler"
                       else "Shuffle the training data anew each epoch (shuffle=True, a RandomSampler, or a sampler "
                       "that draws a new permutation per epoch)"),
                       observed=seen)
    mixed = [d for d in datasets if d["repeated"]]
    short = [d for d in datasets if not d["compared"]]
    if mixed or short:
        d = (mixed or short)[0]
        why = (f"{d['repeated']} of {d['compared']} passes over {d['dataset']} repeated the order of the pass before"
               if mixed else f"the passes over {d['dataset']} drew too few indices to compare (at least {MIN_INDICES} "
                             "needed)")
        return Finding(ID, TITLE, CANNOT_TELL, f"{d['repeated']} of {d['compared']} epochs repeated", "0",
                       why, observed=why)
    compared, passes = sum(d["compared"] for d in datasets), sum(d["passes"] for d in datasets)
    return Finding(ID, TITLE, PASS, f"0 of {compared} epochs repeated", "0",
                   f"every pass over the training data drew a new order ({compared} compared with the pass before)",
                   observed=f"the training batches came in a different order in each of {passes} passes")
