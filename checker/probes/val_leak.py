"""val-leak: no evaluation item is a training item.

Observed. For every DataLoader, at its first batch, the items its dataset stores: after unwrapping ``Subset`` (and a
``SubsetRandomSampler``'s indices, where the loader draws through one; a ``ConcatDataset``'s parts one after the
other), the per-item stores the dataset holds as attributes (or in a tuple of them, ``TensorDataset.tensors``):
tensors, NumPy arrays and lists of numbers whose first dimension is its length, lists of variable-length sequences
(1-D tensors, one per item), of records (tuples or dicts of arrays) and of texts or of the files items are read from
(``ImageFolder.samples``). An item's *content* is its entry in the widest of them (the most values per item: the
inputs), fingerprinted by its bytes, so that two items are *identical* when their stored inputs are equal bit for
bit. A store of one value per item is a label or an index, not an input, unless it holds real numbers first in a
tuple of stores (``TensorDataset(x, y)``: inputs of one feature). A file's entry is fingerprinted by the file's
bytes (up to 100,000 files and 256 MiB in all; beyond, by its name), so that a file copied from the training folder
into the validation folder is the same item. Nothing is fetched through ``__getitem__`` and no random number is
drawn.

Rule. The items of each evaluation loader (one whose batches were never trained on) are compared with the items of
the training loaders. The *baseline* is the share of training items that equal another item of the same training
store: a data set with repeated rows (categorical tables) shows about as many repeats between two honest splits.
The probe fails when at least 16 evaluation items are identical to training items, beyond the baseline by more than
chance allows (4 standard deviations of the shared count and of the baseline) and by at least 10 % of the
evaluation set: the evaluation measures how well the model remembers items it was trained on, not how it does on
new ones. Two splits drawn with overlapping indices or the same seed, a table split after its rows were duplicated,
a test set built from the training arrays or folder: all look alike.

An evaluation that runs on the training items themselves (the training loader, its dataset, a subset of its
indices) is a training accuracy, not a validation: beside a held-out evaluation it is not judged; as the run's only
evaluation it gets advice (its figures say how well the model fits its training data, not how it generalises), never
a failure: reporting a training accuracy alone is a choice, and whether the script calls it a validation is not
something a run shows.

Why a correct script does not fail. Honest splits share no stored item beyond the repeats the data set holds anyway.
An evaluation of (nearly) every training item, beside another, held-out, evaluation set (a training accuracy on a
copy without augmentation, a k-NN monitor's memory bank) is not counted. Each evaluation is compared with the
training that preceded it, of the models it evaluated (all training, when none preceded it or it evaluated none that
trained: an averaged copy): cross-validation, each fold's model trained on the other folds, is judged fold by fold,
whether the model is built anew for each fold or reset. A training set built again (after a restart) repeats
nothing. A data set whose training items mostly repeat each other (more than half) cannot be judged by its items.

Known limits. Items are compared as stored: a copy augmented, noised, cropped or re-encoded is not identical and is
not seen, and neither is a leak through items made by code (no per-item store of the dataset's length: not judged).
Data sets of more than 1,000,000 items or 1 GiB of stored inputs are not read. Loops that slice tensors by hand,
with no DataLoader, are not judged, nor are loaders whose sampler of the script's own drew only part of the dataset
in a whole pass (which part, the probe does not read; ``SubsetRandomSampler``, also inside a ``BatchSampler``, is
read, and a ``DistributedSampler`` shares every item among the ranks). A training accuracy measured on a sample of
the training items rebuilt as a data set of its own (not a ``Subset`` of the training one) reads as a leak.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "val-leak"
TITLE = "evaluation items are not training items"
SYMPTOM_ID, SYMPTOM = "shared-items", "evaluation items that are also training items"
ADVICE_SHOWS = True  # its advice (the training data as the only evaluation) is the val-on-train bug's symptom
MIN_SHARED = 16  # identical items, beyond the baseline, for a leak
MIN_EXCESS = 0.10  # of the evaluation set, beyond the baseline
SIGMAS = 4.0  # beyond the baseline by more than chance allows
MAX_REPEATS = 0.5  # a training set whose items mostly repeat each other cannot be judged by its items
COVERS = 0.95  # an evaluation set holding this share of the training items, beside a held-out one, is a training accuracy
MAX_ITEMS, MAX_BYTES = 1_000_000, 1 << 30
MAX_STORED = 16  # attributes looked at per dataset
MAX_FILES, MAX_FILE_BYTES = 100_000, 256 << 20  # files whose contents are read, at most (else their names compared)
CHUNK = 8192  # rows fingerprinted at once
DRAWN = 0.95  # a whole pass that drew fewer of its dataset's items drew a part the probe does not know


@dataclass
class Observation:
    # "training": per training DataLoader, {"dataset" (class name), "source" (the store fingerprinted, "" when none
    # could be), "items", "why" (why not)}; "evaluations": per evaluation DataLoader, the same and "own" (it reads
    # the training loaders' very items: the same store, a subset of the same indices), "shared" (its items identical
    # to a training item), "repeats" (the share of training items equal to another training item), "train_items",
    # "leaks" (beyond the baseline: see the rule), "covers" (it holds nearly every training item)
    training: list[dict] = field(default_factory=list)
    evaluations: list[dict] = field(default_factory=list)
    reevaluated: int = 0  # evaluation passes over a training DataLoader itself


class Observer:
    def __init__(self, session):
        self.session = session
        self.read: dict[int, dict] = {}
        self._cache: dict[int, tuple] = {}  # id(dataset) -> (a weak reference to it, its store's reading)
        session.on(Event.BATCH, ID, self.on_batch)

    def on_batch(self, batch) -> None:
        observed = self.session.current
        if observed is None or observed.loader in self.read:
            return
        loader = observed.ref() if observed.ref is not None else None
        try:
            self.read[observed.loader] = self.items(loader)
        except Exception as exc:  # a dataset of a shape this rule does not read: say so, never fail the script for it
            self.read[observed.loader] = {"source": "", "why": f"its dataset could not be read ({type(exc).__name__})"}

    def items(self, loader) -> dict:
        """What one loader's dataset stores, item by item (fingerprints), or why it cannot be read."""
        import weakref

        from torch.utils.data import IterableDataset, Subset, SubsetRandomSampler
        from torch.utils.data.distributed import DistributedSampler

        if loader is None:
            return {"source": "", "why": "the DataLoader was gone before it could be read"}
        dataset, indices = loader.dataset, None
        if isinstance(dataset, IterableDataset):
            return {"source": "", "why": f"{type(dataset).__name__} is an IterableDataset (no stored items)"}
        sampler = getattr(loader.batch_sampler, "sampler", None) if loader.batch_sampler is not None else None
        sampler = sampler if isinstance(sampler, SubsetRandomSampler) else loader.sampler  # a BatchSampler's own
        if isinstance(sampler, SubsetRandomSampler):
            indices = [int(i) for i in sampler.indices]
        while isinstance(dataset, Subset):
            inner = [int(i) for i in dataset.indices]
            indices = inner if indices is None else [inner[i] for i in indices]
            dataset = dataset.dataset
        cached = self._cache.get(id(dataset))
        if cached is not None and cached[0]() is dataset:
            store = cached[1]
        else:
            store = store_of(dataset)
            try:
                self._cache[id(dataset)] = (weakref.ref(dataset), store)
            except TypeError:  # an object without weak references is read again for each loader
                pass
        sharded = any(isinstance(x, DistributedSampler)
                      for x in (loader.sampler, getattr(loader.batch_sampler, "sampler", None)))
        held = {"object": id(dataset), "indices": indices, "sharded": sharded}
        if not store["source"]:
            return {**store, **held}
        prints = store["prints"] if indices is None else [store["prints"][i] for i in indices]
        return {**store, **held, "items": len(prints), "prints": prints}

    def summary(self) -> Observation:
        session = self.session
        train = session.training_loaders()
        models: dict[int, set[int]] = {}  # loader -> the models its batches were fed to
        for forward in session.forwards:
            if forward.pass_index is not None:
                models.setdefault(session.passes[forward.pass_index].loader, set()).add(forward.module)
        self._drawn_in_part()
        roles = [session.role(p.index) if p.batches else None for p in session.passes]
        evaluated = {p.loader for p in session.passes if roles[p.index] == "eval"}
        public = ("dataset", "source", "items", "why")
        train_keys = [k for k in sorted(self.read) if k in train]
        training = distinct(self.read[k] for k in train_keys)
        evaluations = []
        for row in distinct(self.read[k] for k in sorted(self.read) if k in evaluated and k not in train):
            out = {"dataset": "", "items": 0, **{k: row.get(k) for k in public if k in row}}
            # compared with the training that preceded its passes, of the models it evaluated (k-fold: each fold's
            # model, its own fold's training, whether the model is built anew or reset); with all training where
            # none preceded it or it evaluated none of the models trained (an averaged copy of the model)
            same = [k for k in sorted(self.read) if k in evaluated and key_of(self.read[k]) == key_of(row)]
            judged = set().union(*(models.get(k, set()) for k in same))
            window = preceding(session, roles, set(same))
            related = ([k for k in train_keys if k in window and models.get(k, set()) & judged]
                       or [k for k in train_keys if k in window]
                       or [k for k in train_keys if models.get(k, set()) & judged] or train_keys)
            readable = [r for r in distinct(self.read[k] for k in related) if r["source"]]
            out["own"] = any(own(row, self.read[k]) for k in related)
            if row["source"] and readable and not out["own"]:
                out.update(compare(readable, row))
            evaluations.append(out)
        reevaluated = sum(1 for p in session.passes if p.loader in train and roles[p.index] == "eval")
        return Observation([{"dataset": "", "items": 0, **{k: row[k] for k in public if k in row}}
                            for row in training], evaluations, reevaluated)

    def _drawn_in_part(self) -> None:
        """A loader whose sampler drew only part of its dataset's items in a whole pass, through a sampler this
        probe does not read (a split by a sampler of the script's own), read items that are not known: not judged.
        A ``DistributedSampler`` draws each rank's share of every item."""
        for key, row in self.read.items():
            if not row["source"] or row["indices"] is not None or row.get("sharded"):
                continue
            drawn = [p.order.indices for p in self.session.passes if p.loader == key and p.exhausted and p.order]
            if drawn and max(drawn) < DRAWN * row["items"]:
                self.read[key] = {"source": "", "object": row["object"], "indices": None, "unknown": True,
                                  "why": (f"its sampler drew {max(drawn)} of the {row['items']} items of "
                                          f"{row['dataset']} in a pass: which ones, this probe does not read")}


def preceding(session, roles: list, keys: set[int]) -> set[int]:
    """The training loaders of the training that preceded each evaluation pass of the loaders ``keys``: walking
    back from the pass over other evaluations to the last training pass, then over the training passes since the
    evaluation before them."""
    found: set[int] = set()
    for p in session.passes:
        if p.loader not in keys or roles[p.index] != "eval":
            continue
        i = p.index - 1
        while i >= 0 and roles[i] != "train":
            i -= 1
        while i >= 0 and roles[i] != "eval":
            if roles[i] == "train":
                found.add(session.passes[i].loader)
            i -= 1
    return found


def key_of(row: dict) -> tuple:
    """What identifies the items a loader read: its store and the indices it drew from it."""
    indices = None if row.get("indices") is None else tuple(row["indices"])
    if not row["source"]:
        return "", row["why"], row.get("object"), indices
    return row["identity"], indices


def distinct(rows) -> list[dict]:
    """The rows, once per set of items read (a DataLoader made anew each epoch reads the same items each time)."""
    seen: dict = {}
    for row in rows:
        seen.setdefault(key_of(row), row)
    return list(seen.values())


def own(held: dict, train: dict) -> bool:
    """Whether ``held`` reads ``train``'s very items: the same dataset (or stored tensor), and indices among the
    training ones."""
    if held.get("unknown") or train.get("unknown"):
        return False  # drawn by a sampler the probe does not read: which items, it does not know
    same = held.get("object") is not None and held.get("object") == train.get("object")
    if not same and not (held["source"] and train["source"] and held["identity"] == train["identity"]):
        return False
    return train["indices"] is None or (held["indices"] is not None and set(held["indices"]) <= set(train["indices"]))


def store_of(dataset) -> dict:
    """The dataset's widest per-item store, fingerprinted item by item."""
    import torch

    from torch.utils.data import ConcatDataset

    name = type(dataset).__name__
    if isinstance(dataset, ConcatDataset):  # its parts' items, one after the other
        parts = [store_of(part) for part in dataset.datasets]
        unread = next((part for part in parts if not part["source"]), None)
        if unread is not None or not parts:
            return {"source": "", "why": f"a part of {name} cannot be read: {unread['why'] if unread else 'none'}"}
        return {"dataset": name, "source": f"{name} of {', '.join(dict.fromkeys(p['source'] for p in parts))}",
                "why": "", "identity": "+".join(p["identity"] for p in parts),
                "prints": [x for part in parts for x in part["prints"]]}
    try:
        n = len(dataset)
    except TypeError:
        return {"source": "", "why": f"{name} has no length"}
    if n == 0:
        return {"source": "", "why": f"{name} is empty"}
    if n > MAX_ITEMS:
        return {"source": "", "why": f"{name} holds {n} items (more than {MAX_ITEMS:,} are not read)"}
    best, stores, scalars = None, 0, []  # best: (values per item, attribute, tensor or list)
    for attr, value in stored(dataset, n):
        stores += 1
        if isinstance(value, torch.Tensor):
            width = value[0].numel()
        else:
            width = listed_width(value) + 0.5  # a list outranks a table as wide
        if width < 2:  # one value per item: a label, an index, or (a real number beside a label) an input
            if isinstance(value, torch.Tensor) and value.is_floating_point() and attr.endswith("[0]"):
                scalars.append((attr, value))  # the first of a tuple of tensors: (inputs, targets)
            continue
        if best is None or width > best[0]:
            best = (width, attr, value)
    if best is None and scalars and stores >= 2:  # inputs of one real number each, stored first, before their targets
        best = (1, *scalars[0])
    if best is None:
        return {"source": "", "why": (f"{name} stores no inputs of its length, only labels or nothing (its items come "
                                      "from files, Python objects or code): they are out of sight")}
    _, attr, value = best
    if isinstance(value, torch.Tensor):
        if value.numel() * value.element_size() > MAX_BYTES:
            return {"source": "", "why": f"{name}.{attr} holds more than {MAX_BYTES >> 30} GiB (not read)"}
        prints = table_prints(value)
        identity = f"{value.data_ptr()}:{tuple(value.shape)}:{value.stride()}:{value.dtype}"
    else:
        kind = listed(value)
        prints = file_prints(value) if kind == TEXTS else None
        source = f"the files named by {name}.{attr}" if prints is not None else f"{name}.{attr}"
        if prints is None:
            prints = [item_print(kind, v) for v in value]
        identity = f"{id(value)}:{len(value)}"
        return {"dataset": name, "source": source, "why": "", "identity": identity, "prints": prints}
    return {"dataset": name, "source": f"{name}.{attr}", "why": "", "identity": identity, "prints": prints}


def file_prints(value) -> list[int] | None:
    """One fingerprint per item from the contents of the file its entry names (a copy of a file under another name
    is the same item), where every entry names a file and they hold at most MAX_FILE_BYTES together; None
    otherwise (the entries are then compared as they are: texts, or paths)."""
    import hashlib
    import os

    paths = [v[0] if isinstance(v, tuple) else v for v in value]
    if len(paths) > MAX_FILES or not all(isinstance(p, (str, bytes)) for p in paths):
        return None
    try:
        if not all(os.path.isfile(p) for p in paths[:8]) or sum(os.path.getsize(p) for p in paths) > MAX_FILE_BYTES:
            return None
        prints = []
        for path in paths:
            with open(path, "rb") as f:
                prints.append(int.from_bytes(hashlib.blake2b(f.read(), digest_size=8).digest(), "little", signed=True))
        return prints
    except (OSError, ValueError):  # a file gone or unreadable: compare the entries themselves
        return None


def stored(dataset, n: int):
    """(attribute, value) of each tensor (NumPy array, list of numbers) of ``n`` rows the dataset holds, or in a
    tuple or list it holds (``TensorDataset.tensors``), and of each list of ``n`` per-item entries (sequences,
    records, texts); a plain list given to the DataLoader as its dataset is its own store."""
    import torch

    if isinstance(dataset, (list, tuple)):
        if listed(dataset):
            yield "items", dataset
        return
    for name, value in list(vars(dataset).items())[:MAX_STORED] if hasattr(dataset, "__dict__") else []:
        held = [(f"{name}[{i}]", v) for i, v in enumerate(value[:MAX_STORED])] \
            if isinstance(value, (tuple, list)) and len(value) != n else [(name, value)]
        for label, v in held:
            if isinstance(v, (list, tuple)) and len(v) == n and listed(v):
                yield label, v
                continue
            if not isinstance(v, torch.Tensor) and too_large(v):
                continue  # a lazy array (HDF5, zarr, a memory map) is never read whole into memory
            try:
                t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v) \
                    if hasattr(v, "__array__") or (isinstance(v, (list, tuple)) and v and isinstance(v[0], (int, float))) \
                    else None
            except (TypeError, ValueError, RuntimeError):
                continue
            if t is not None and t.layout == torch.strided and t.dim() >= 1 and t.shape[0] == n \
                    and not t.is_complex() and t.device.type != "meta":
                yield label, t


def too_large(v) -> bool:
    """Whether an array-like that is not a tensor would take more than MAX_BYTES once read (judged by its shape and
    dtype, before anything is read)."""
    import math

    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    try:
        return shape is not None and math.prod(shape) * getattr(dtype, "itemsize", 8) > MAX_BYTES
    except TypeError:
        return False


TEXTS, SEQUENCES, RECORDS = "texts", "sequences", "records"


def listed(value) -> str | None:
    """What a list of per-item entries holds (judged by its first 64): TEXTS (strings or bytes, or records that start
    with one: ``ImageFolder.samples``' (path, class), the files items are read from), SEQUENCES (1-D tensors or
    lists of numbers, not all of one length) or RECORDS (tuples, lists or dicts of arrays or texts:
    ``[(image, mask), ...]``, ``[(label, text), ...]``); None for anything else."""
    head = value[:64]
    if not head:
        return None
    if all(isinstance(v, (str, bytes)) or (isinstance(v, tuple) and v and isinstance(v[0], (str, bytes))) for v in head):
        return TEXTS
    if all(one_dimensional(v) for v in head):
        return SEQUENCES if len({len(v) for v in head}) > 1 else None  # of one length: a table (read as a tensor)
    if all(isinstance(v, (tuple, list, dict)) and v and any(array(e) or isinstance(e, (str, bytes)) for e in fields(v))
           for v in head):
        return RECORDS
    return None


def one_dimensional(v) -> bool:
    import torch

    if isinstance(v, torch.Tensor):
        return v.dim() == 1 and v.layout == torch.strided
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(e, (int, float)) for e in v[:16])


def array(e) -> bool:
    """A tensor or a NumPy array (anything with ``__array__`` and a shape)."""
    import torch

    return isinstance(e, torch.Tensor) or (hasattr(e, "__array__") and hasattr(e, "shape"))


def fields(record) -> list:
    return [record[k] for k in sorted(record, key=str)] if isinstance(record, dict) else list(record)


def raw(e) -> tuple:
    """An array's dtype, shape and bytes (a tensor's on the CPU)."""
    import numpy as np
    import torch

    a = e.detach().cpu().numpy() if isinstance(e, torch.Tensor) else np.asarray(e)
    return str(a.dtype), a.shape, a.tobytes()


def item_print(kind: str, v) -> int:
    if kind == TEXTS:
        return hash(v[0] if isinstance(v, tuple) else v)
    if kind == SEQUENCES:
        return hash(raw(v)) if array(v) else hash(tuple(v))
    return hash(tuple(raw(e) if array(e) else e if isinstance(e, (str, bytes)) else repr(e) for e in fields(v)))


def listed_width(value) -> int:
    """Values per item of a list store, at most (judged by its first 64 entries)."""
    kind, head = listed(value), value[:64]
    if kind == TEXTS:
        return max(len(v[0] if isinstance(v, tuple) else v) for v in head)
    if kind == SEQUENCES:
        return max(len(v) for v in head)
    return max(sum(int(e.numel() if hasattr(e, "numel") else e.size) if array(e) else len(e) if isinstance(e, (str, bytes))
                   else 0 for e in fields(v)) for v in head)


def table_prints(t) -> list[int]:
    """One 64-bit fingerprint per row of ``t``, from the row's bytes: equal rows, equal fingerprints."""
    import torch

    n = t.shape[0]
    g = torch.Generator().manual_seed(0x5EED)  # a generator of its own: the script's random streams are untouched
    prints: list[int] = []
    multipliers = None
    for start in range(0, n, CHUNK):
        rows = t[start:start + CHUNK].detach().to("cpu").reshape(min(CHUNK, n - start), -1).contiguous()
        if rows.dtype == torch.bool:
            rows = rows.view(torch.uint8)
        raw = rows.view(torch.uint8)
        pad = (-raw.shape[1]) % 8
        if pad:
            raw = torch.nn.functional.pad(raw, (0, pad))
        words = raw.contiguous().view(torch.int64)
        if multipliers is None:
            multipliers = torch.randint(-(1 << 62), 1 << 62, (2, words.shape[1]), generator=g, dtype=torch.int64) | 1
        first = (words * multipliers[0]).sum(1)
        second = ((words ^ (0x9E3779B97F4A7C15 - (1 << 64))) * multipliers[1]).sum(1)  # a second, unrelated hash
        prints += (first * 1_000_003 + second).tolist()
    return prints


def compare(train: list[dict], held: dict) -> dict:
    """How many of ``held``'s items are training items, against the training items' own repeats (within each
    training store: a script that builds its training set again, after a restart, repeats nothing)."""
    from collections import Counter

    union: set[int] = set()
    repeated = items = 0
    for row in train:
        counts = Counter(row["prints"])
        repeated += sum(c for c in counts.values() if c > 1)
        items += len(row["prints"])
        union.update(counts)
    repeats = repeated / items if items else 0.0
    shared = sum(1 for p in held["prints"] if p in union)
    m = len(held["prints"])
    expected = repeats * m
    # the chance spread of the shared count, and of the baseline it is held against (repeats come in groups: twice
    # the binomial variance of the share measured on the training items)
    variance = m * repeats * (1 - repeats) + m * m * repeats * (1 - repeats) * 2 / max(items, 1)
    spread = SIGMAS * math.sqrt(max(variance, 1.0))
    return {"shared": shared, "train_items": len(union), "repeats": repeats,
            "leaks": shared >= MIN_SHARED and shared - expected >= spread and shared / m - repeats >= MIN_EXCESS,
            "covers": len(set(held["prints"]) & union) >= COVERS * len(union)}


def judge(obs: Observation, facts: RunFacts) -> Finding:
    readable = [row for row in obs.training if row["source"]]
    if not obs.training:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="not judged: no DataLoader fed training",
                       observed="no DataLoader fed training")
    if (obs.reevaluated or obs.evaluations) and all(row["own"] for row in obs.evaluations):
        seen = "every item evaluated is a training item: the run evaluated only the data it trained on"
        return Finding(ID, TITLE, ADVICE, "no held-out items", "a held-out split",
                       f"{seen} (the training data set itself); its figures measure how well the model fits what it "
                       "was trained on, not how it does on new data: hold out a split to validate (fine, if a training "
                       "accuracy is all it means to report)", observed=seen)
    if not readable:
        why = f"the training items cannot be read: {obs.training[0]['why']}"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    compared = [row for row in obs.evaluations if "shared" in row]
    if not compared:
        why = (f"no evaluation DataLoader's items could be read: "
               f"{next(row['why'] for row in obs.evaluations if not row['own'])}" if obs.evaluations
               else "no DataLoader was evaluated apart from training")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    repeats = compared[0]["repeats"]
    if repeats > MAX_REPEATS:
        why = (f"{repeats:.0%} of the training items repeat another training item: identical items are no sign of a "
               "leak in such data")
        return Finding(ID, TITLE, CANNOT_TELL, f"{repeats:.0%} repeats", f"≤ {MAX_REPEATS:.0%}",
                       f"cannot tell: {why}", observed=why)
    held_out = any(not row["leaks"] for row in compared)
    leaking = [row for row in compared if row["leaks"] and not (held_out and row["covers"])]
    if leaking:
        row = max(leaking, key=lambda r: r["shared"] / r["items"])
        share = row["shared"] / row["items"]
        base = f"; {row['repeats']:.1%} of the training items repeat one another" if row["repeats"] else ""
        seen = (f"{row['shared']} of the {row['items']} items evaluated ({share:.0%}) are identical to items trained "
                f"on{base}")
        return Finding(ID, TITLE, FAIL, f"{share:.0%} shared", f"≤ {row['repeats']:.0%}",
                       f"{row['shared']} of the {row['items']} items of the evaluation set ({row['source']}) are "
                       f"identical, bit for bit, to some of the {row['train_items']} distinct "
                       f"training items{base}: the evaluation measures how well the model remembers its training data, not how "
                       "it does on data it has not seen", observed=seen)
    honest = [row for row in compared if not row["leaks"]]
    shared = sum(row["shared"] for row in honest)
    items = sum(row["items"] for row in honest)
    copies = [row["source"] for row in compared if row["leaks"]]
    aside = (f"; an evaluation of every training item ({copies[0]}) beside them is a training accuracy, not counted"
             if copies else "")
    return Finding(ID, TITLE, PASS, f"{shared} shared", f"≤ {repeats:.0%}",
                   f"{shared} of {items} held-out items are identical to training items "
                   f"({compared[0]['train_items']} distinct training items compared){aside}")
