"""epoch-order: every epoch serves the training data in a new order, or a fixed order does no harm.

A DataLoader draws each epoch's indices from its sampler. Drawn in the same order
every epoch, the model sees the same batches, built of the same items, in the same
sequence: the gradient noise that averages out over epochs repeats instead, and
whatever order the data were stored in (sorted by class, by source, by date)
biases every epoch the same way.

Observed. For every DataLoader pass: the indices its sampler (or batch sampler)
yields (recorded by :mod:`checker.instrument`, a hash of the whole order plus its
first index batches), and what the batches served: a digest of each batch's class
labels (its last one-dimensional integer tensor) and of a sample of its tensors'
values, in order. For the first passes of each loader, each batch's labels are kept
to measure how *representative* the batches of its first trained pass are: the mean total-variation distance
between a batch's label mix and the whole pass's (its *spread*), against the same
for the pass's labels in three shuffled orders (the spread shuffling would give).
Only trained passes count, those whose batches fed a forward that a backward pass
reached (or an update applied): a peek at the first batch, or an evaluation pass
over the training set, is not an epoch. Passes are grouped by the dataset they read
(a DataLoader built anew each epoch over the same dataset is compared with its
predecessors), and each pass is compared with the one before it.

Two passes serve *the same items in the same order* when their sampler drew the
same indices (equal hashes, or equal first index batches when one stopped early)
and the batches' labels are the same (where the batches have labels; else their
values are). Indices that repeat while the labels differ are a dataset that draws
new items on every access (random pairs, a generator that ignores its index): a new
order of data, whatever the sampler did. Without a sampler (an IterableDataset) the
labels (or values) alone decide. At least 10 indices must be compared: a random
order of n items repeats by chance with probability 1/n!, below 3e-7 for n = 10.

Rule, for a dataset whose every compared pass repeated the one before it:

* fail when its sampler says it shuffles (a ``DistributedSampler`` with
  ``shuffle=True`` whose ``set_epoch`` is never called: the script's own setting
  is contradicted);
* fail when the fixed order is unrepresentative: its batches' spread is more than
  twice what shuffling gives and at least 0.1 above it (data stored sorted by
  class, by source or by date: each stretch of an epoch trains on one kind);
* advice otherwise: the batches look like the whole set (or there are no labels to
  tell), so nothing is harmed beyond noise that repeats; shuffling is still the
  usual practice, and a kata whose bug this is stays unsolved while the advice stands.

It passes when every dataset's passes serve a new order; it cannot tell when some
passes repeat and some do not, when too few indices were compared, or when the
indices repeat, no labels were seen and the values differ (an augmentation of the
same items cannot be told from new items).

Why a correct script does not fail. ``shuffle=True`` (a ``RandomSampler``), an
explicit ``RandomSampler`` with its own generator, ``WeightedRandomSampler``,
``RandomSampler(replacement=True)``, a ``DistributedSampler`` whose ``set_epoch``
is called, and a custom sampler that draws a new permutation each epoch all give a
new order in every pass; a dataset that draws fresh random items per access serves
new data whatever the order; a validation loader keeps its order, correctly (only
training loaders are judged). A loader without shuffling over data stored in a
random order (the PyTorch quickstart, ``torchvision`` MNIST without ``shuffle``)
is advice, never a failure. A permutation drawn once before training
(``Subset(data, perm)``, ``sampler=perm.tolist()``) is a fixed order: advice, or a
failure when its batches are unrepresentative.

Not applicable when no DataLoader fed training (batches sliced from tensors), or
when each training dataset was read in a single pass (one epoch: the order cannot
repeat). Not caught: a dataset rebuilt each epoch (a new ``Subset`` over a new
permutation, or over the same one) is a new group each time. Cost: per batch, one
hash of its labels and of at most 256 sampled values of each of its first tensors.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "epoch-order"
TITLE = "a new order every epoch"
SYMPTOM_ID, SYMPTOM = "batch-order", "the order of training batches across epochs"
ADVICE_SHOWS = True  # its advice (one fixed order, representative batches) is no-shuffle's and sampler-epoch's symptom
MIN_INDICES = 10  # compared indices for a repeat to mean a fixed order: 1/10! < 3e-7 by chance
SAMPLED = 256  # values of a tensor that go into a batch's digest
KEPT_DIGESTS = 8  # per-batch digests kept in full (to compare a pass that stopped early)
KEPT_LABELS = 100_000  # labels kept to measure the batches' spread (its first passes: a peek may come first)
KEPT_PASSES = 3  # passes of each loader whose labels are kept
SPREAD_RATIO, SPREAD_MARGIN = 2.0, 0.1  # a fixed order this much less representative than a shuffled one fails
SHUFFLES = 3  # shuffled orders the spread is compared with


@dataclass
class Observation:
    # per training dataset: {"dataset": its class, "sampler": the class of what drew its indices, "shuffles": the
    # sampler's own shuffle setting (None: it has none), "passes": trained passes, "items": indices (or samples) in
    # its first pass, "compared": pairs of passes compared, "repeated": of those, pairs serving the same items in the
    # same order, "fresh": pairs whose indices repeated but whose labels differed, "unsure": pairs whose indices
    # repeated, without labels, with different values, "varied": repeated pairs whose labels repeated but whose
    # values differed (augmented, or items drawn anew), "spread" / "shuffled": the first pass's label-mix distance
    # and what shuffling gives (None without labels), "classes": labels seen}
    datasets: list[dict] = field(default_factory=list)
    unordered: list[str] = field(default_factory=list)  # training datasets read without a sampler (IterableDataset)
    loaders: bool = False  # some DataLoader fed training


@dataclass
class Served:
    """What one pass's batches served, in order."""

    batches: int = 0
    labels: int = 0  # a hash of every batch's labels, in order (0: none had labels)
    values: int = 0  # a hash of every batch's sampled values, in order
    labelled: bool = False
    head: list[tuple[int, int]] = field(default_factory=list)  # the first batches' (labels, values) digests
    kept: list[list[int]] | None = None  # a loader's first pass: each batch's labels


class Observer:
    def __init__(self, session):
        self.session = session
        self.served: dict[int, Served] = {}  # pass index -> what it served
        self.passes_of: dict[int, int] = {}  # loader key -> its passes seen so far
        self.kept = 0
        session.on(Event.BATCH, ID, self.on_batch)

    def on_batch(self, batch) -> None:
        current = self.session.current
        if current is None:
            return
        served = self.served.get(current.index)
        if served is None:
            served = self.served[current.index] = Served()
            self.passes_of[current.loader] = self.passes_of.get(current.loader, 0) + 1
            if self.passes_of[current.loader] <= KEPT_PASSES:
                served.kept = []
        labels = self.session.labels
        label_digest = 0
        if labels is not None:
            values = labels.tolist()
            label_digest = hash(tuple(values))
            served.labelled = True
            if served.kept is not None and self.kept < KEPT_LABELS:
                served.kept.append([int(v) for v in values])
                self.kept += len(values)
        value_digest = digest(batch)
        served.batches += 1
        served.labels = hash((served.labels, label_digest))
        served.values = hash((served.values, value_digest))
        if len(served.head) < KEPT_DIGESTS:
            served.head.append((label_digest, value_digest))

    def summary(self) -> Observation:
        from torch.utils.data import IterableDataset

        train = self.session.training_loaders()
        trained = {f.pass_index for f in self.session.forwards if f.reached}  # passes a backward pass reached
        groups: dict[int, dict] = {}
        unordered: dict[str, None] = {}
        for p in self.session.passes:
            loader = p.ref() if p.loader in train and p.ref is not None else None
            if loader is None or not (p.index in trained or p.updates):
                continue  # a peek at the first batch, or an evaluation pass over the training set, is not an epoch
            stream = isinstance(loader.dataset, IterableDataset)
            if stream:
                unordered.setdefault(type(loader.dataset).__name__, None)
            if not stream and (p.order is None or not p.order.indices):
                continue
            group = groups.setdefault(id(loader.dataset), {"dataset": type(loader.dataset).__name__,
                                                           "sampler": sampler_name(loader),
                                                           "shuffles": shuffles(loader), "passes": []})
            group["passes"].append((p.order if not stream else None, self.served.get(p.index, Served())))
        return Observation([summarise(g) for g in groups.values()], list(unordered), bool(train))


def digest(batch) -> int:
    """A hash of a sample of the values of the batch's first tensors (CPU ones: nothing is copied off a GPU)."""
    from checker.tensors import plain, tensors_in

    parts = []
    for t in tensors_in(batch, 4):
        if plain(t) and t.device.type == "cpu" and t.numel():
            flat = t.detach().reshape(-1)
            parts.append((tuple(t.shape), tuple(flat[::max(1, flat.numel() // SAMPLED)][:SAMPLED].tolist())))
    return hash(tuple(parts))


def sampler_name(loader) -> str:
    sampler = loader.sampler if loader.batch_sampler is None or type(loader.batch_sampler).__name__ == "BatchSampler" \
        else loader.batch_sampler
    return type(sampler).__name__


def shuffles(loader) -> bool | None:
    """The sampler's own ``shuffle`` setting (a DistributedSampler's), None when it has none."""
    value = getattr(loader.sampler, "shuffle", None)
    return value if isinstance(value, bool) else None


def same_order(a, b) -> bool | None:
    """Whether two passes drew the same indices in the same order; None when too few were compared."""
    if a.batches == b.batches and a.indices == b.indices:
        return a.digest == b.digest if a.indices >= MIN_INDICES else None
    m = min(len(a.head), len(b.head))
    if sum(len(batch) for batch in a.head[:m]) < MIN_INDICES:
        return None
    return a.head[:m] == b.head[:m]


def same_served(a: Served, b: Served, labels: bool) -> bool:
    """Whether two passes' batches served the same labels (``labels``) or values, in the same order."""
    pick = 0 if labels else 1
    if a.batches == b.batches:
        return (a.labels if labels else a.values) == (b.labels if labels else b.values)
    m = min(len(a.head), len(b.head))
    return m > 0 and [d[pick] for d in a.head[:m]] == [d[pick] for d in b.head[:m]]


def spread(batches: list[list[int]]) -> float | None:
    """The mean total-variation distance between each batch's label mix and the whole pass's."""
    labels = [v for batch in batches for v in batch]
    if len(batches) < 2 or not labels:
        return None
    total = {}
    for v in labels:
        total[v] = total.get(v, 0) + 1
    whole = {v: c / len(labels) for v, c in total.items()}
    distances = []
    for batch in batches:
        if not batch:
            continue
        mix = {}
        for v in batch:
            mix[v] = mix.get(v, 0) + 1
        distances.append(0.5 * sum(abs(mix.get(v, 0) / len(batch) - share) for v, share in whole.items()))
    return sum(distances) / len(distances) if distances else None


def shuffled_spread(batches: list[list[int]]) -> float | None:
    """The spread the same labels give in shuffled orders, cut into batches of the same sizes (a fixed seed of
    the checker's own: the script's random streams are not touched)."""
    labels = [v for batch in batches for v in batch]
    sizes = [len(batch) for batch in batches]
    found = []
    rng = random.Random(0)
    for _ in range(SHUFFLES):
        order = labels[:]
        rng.shuffle(order)
        cut, start = [], 0
        for size in sizes:
            cut.append(order[start:start + size])
            start += size
        value = spread(cut)
        if value is not None:
            found.append(value)
    return sum(found) / len(found) if found else None


def summarise(group: dict) -> dict:
    passes = group["passes"]
    labels = all(served.labelled for _, served in passes)
    compared = repeated = fresh = unsure = varied = 0
    for (order_a, served_a), (order_b, served_b) in zip(passes, passes[1:]):
        indices = same_order(order_a, order_b) if order_a is not None and order_b is not None else True
        if indices is None:
            continue
        if order_a is None and served_a.batches < 2:
            continue
        compared += 1
        if not indices:
            continue
        if same_served(served_a, served_b, labels):
            repeated += 1
            varied += labels and not same_served(served_a, served_b, labels=False)  # other inputs, same labels
        elif labels:
            fresh += 1
        elif order_a is not None:
            unsure += 1  # the same indices, other values, no labels: augmentation or new items
    first = passes[0][1]
    kept = first.kept or next((served.kept for _, served in passes if served.kept), [])
    return {"dataset": group["dataset"], "sampler": group["sampler"], "shuffles": group["shuffles"],
            "stream": passes[0][0] is None,
            "passes": len(passes), "items": passes[0][0].indices if passes[0][0] is not None else first.batches,
            "compared": compared, "repeated": repeated, "fresh": fresh, "unsure": unsure, "varied": varied,
            "spread": spread(kept), "shuffled": shuffled_spread(kept), "classes": len({v for b in kept for v in b})}


def unrepresentative(d: dict) -> bool:
    return d["spread"] is not None and d["shuffled"] is not None and d["spread"] > SPREAD_RATIO * d["shuffled"] \
        and d["spread"] - d["shuffled"] >= SPREAD_MARGIN


def judge(obs: Observation, facts: RunFacts) -> Finding:
    datasets = [d for d in obs.datasets if d["passes"] >= 2 and not (d.get("stream") and d["repeated"] < d["compared"])]
    datasets = [d for d in datasets if not d.get("stream") or d["compared"]]  # a stream is judged only when it repeats
    if not datasets:
        if any(not d.get("stream") for d in obs.datasets):
            why = "each training dataset was read in one pass (one epoch): its order cannot repeat"
        elif obs.unordered:
            why = (f"training read an IterableDataset ({', '.join(obs.unordered)}), which streams its items "
                   "without a sampler, and its passes did not serve the same items in the same order")
        elif obs.loaders:
            why = "the training DataLoader drew no indices from a sampler"
        else:
            why = "no DataLoader fed training (batches were made another way): there is no sampler order to compare"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why)
    fixed = [d for d in datasets if d["compared"] and d["repeated"] == d["compared"]]
    if fixed:
        return fixed_order(max(fixed, key=lambda d: (bool(d["shuffles"]), unrepresentative(d))))
    mixed = [d for d in datasets if d["repeated"] or d["unsure"]]
    short = [d for d in datasets if not d["compared"]]
    if mixed or short:
        d = (mixed or short)[0]
        if d["unsure"] and not d["repeated"]:
            why = (f"the passes over {d['dataset']} drew the same indices in the same order, but the batches held "
                   "other values each time and had no class labels: an augmentation of the same items cannot be told "
                   "from new items")
        elif mixed:
            why = f"{d['repeated']} of {d['compared']} passes over {d['dataset']} repeated the order of the pass before"
        else:
            why = f"the passes over {d['dataset']} drew too few indices to compare (at least {MIN_INDICES} needed)"
        return Finding(ID, TITLE, CANNOT_TELL, f"{d['repeated']} of {d['compared']} epochs repeated", "0",
                       why, observed=why)
    compared, passes = sum(d["compared"] for d in datasets), sum(d["passes"] for d in datasets)
    fresh = [d for d in datasets if d["fresh"]]
    if fresh:
        d = fresh[0]
        text = (f"the sampler of {d['dataset']} drew the same indices in the same order, but its batches served other "
                "items in every pass (the dataset draws new items on each access): a new order of data every epoch")
        return Finding(ID, TITLE, PASS, f"0 of {compared} epochs repeated", "0", text, observed=text)
    return Finding(ID, TITLE, PASS, f"0 of {compared} epochs repeated", "0",
                   f"every pass over the training data drew a new order ({compared} compared with the pass before)",
                   observed=f"the training batches came in a different order in each of {passes} passes")


def fixed_order(d: dict) -> Finding:
    seen = (f"the training batches of {d['dataset']} came in the same order in all {d['passes']} passes over its "
            f"{d['items']} items")
    if d["varied"] and d["varied"] == d["repeated"]:
        seen = (f"the training batches of {d['dataset']} served their labels in the same order in all {d['passes']} "
                f"passes over its {d['items']} items (their inputs differed each pass: augmented, or drawn anew on "
                "each access)")
    measured, threshold = f"{d['repeated']} of {d['compared']} epochs repeated", "0"
    mix = ""
    if d["spread"] is not None and d["shuffled"] is not None:
        mix = (f"; each batch's label mix was {d['spread']:.2f} from the whole set's (total variation), where "
               f"batches of items picked by chance give {d['shuffled']:.2f}")
    if d["shuffles"]:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{seen}, although its sampler ({d['sampler']}) is set to shuffle: a DistributedSampler draws a "
                       "new permutation only when told the epoch, so call sampler.set_epoch(epoch) before each epoch",
                       observed=seen)
    if unrepresentative(d):
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{seen}{mix}: the data are stored in an order (by class, by source, by date) that the "
                       f"sampler ({d['sampler']}) keeps, so each stretch of every epoch trains on one kind of item. "
                       "Shuffle the training data anew each epoch (shuffle=True, a RandomSampler, or a sampler that "
                       "draws a new permutation per epoch)", observed=seen + mix)
    representative = (f"; the batches look like the whole set{mix}" if mix else
                      "; without class labels, whether the batches are representative cannot be told")
    return Finding(ID, TITLE, ADVICE, measured, threshold,
                   f"{seen}{representative}. Nothing shows harm beyond gradient noise that repeats every epoch, "
                   f"but shuffling anew each epoch is the usual practice: its sampler ({d['sampler']}) yields one "
                   "fixed order (shuffle=True, or a sampler that draws a new permutation per epoch)",
                   observed=seen + representative)
