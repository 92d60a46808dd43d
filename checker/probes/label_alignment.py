"""label-alignment: each training input is served with its own label.

A map-style dataset that stores its inputs and labels as tensors (attributes of
the dataset, or ``TensorDataset.tensors``) defines a label for each stored input.
If ``__getitem__`` takes the label from another index than the input (an
off-by-one), the loss is computed against labels that belong to other inputs: the
model sees noise in place of a signal and cannot learn.

Observed. The first 2 batches of every pass of a DataLoader (at most 256 rows per
loader), with the indices its sampler drew for them (recorded by
:mod:`checker.instrument`), and the tensors the dataset holds whose first dimension
is its length (after unwrapping ``Subset``; NumPy arrays and lists of numbers
count). No item is fetched twice and no random number is drawn: only batches the
script asked for are read.

Which stored tensor holds the inputs. The batch element with the most values per
row is the input; stored tensors with as many values per row are candidates. For
each row and each offset k in -3..3, the distance from the returned input to the
candidate's row at (index + k) mod n is measured (after standardising each row,
when it has at least 8 values, so that a normalising transform keeps its match);
each row votes for its nearest offset (exact ties do not vote). A batch is
*matched* when one offset gets at least a third of the rows and three times the
votes of any other: augmentation (noise, flips of some items) moves some votes, not
the majority. A dataset that stores variable-length sequences (a list of 1-D tensors or of lists of
numbers, one per item: a *ragged* store) and pads them per batch is matched the same
way, each padded row against each candidate sequence aligned at the row's start and
at its end (right or left padding), on the sequence's own positions only, raw (no
standardising: token ids); a candidate longer than the row cannot match, and of two
exact matches the longer sequence is nearer (a shorter one that is a prefix of the
row is not the row's item). The matched offset gives each row its item s (inputs may be read at
a shifted index too: then labels are judged against that item). Batches whose
inputs match no stored rows (crops, resizing, inputs built on the fly) are not judged.

Rule. Every other batch element with at most 128 values per row is a label
candidate, and every other stored tensor (not sharing storage with the inputs,
at most 128 values per row) a label source. For a source Y and an offset k, the
rows are grouped by the value of Y at s + k; the *agreement* is the share of rows
whose returned label is their group's most common one. Agreement 1 means the
returned label is a function of Y at s + k (the identity, ``y - 1``, one-hot,
smoothed: any consistent encoding). It is *decisive* when at least 16 rows repeat
a value of Y seen in an earlier row (a function that is never put to the test
proves nothing: unique regression targets). A label is *aligned* when some source
agrees at offset 0 (agreement >= 0.98, decisively). The probe fails when a label
is not aligned at offset 0 but is, decisively, at another offset (it is the label
of a neighbouring item) and no other element of the batch is aligned: one element
matching its own item and another a neighbour's (a previous label served as a
feature) is as likely deliberate as not, and the probe cannot tell. It passes when
every label candidate that some source explains is aligned at offset 0 and the
check had power (the same source disagrees at some other offset, so that a shift
would have shown). Otherwise it cannot tell.

Why a correct script does not fail. A dataset that returns the label stored with
the input's own item agrees exactly at offset 0, however the label is encoded; a
dataset that reads inputs and labels from the same shifted index is matched at
that shift. Label noise, random labels (a rotation to predict) or mixing items
agree at no offset: the probe cannot tell. Only loaders whose batches are trained
on are judged. A fail needs the returned labels to equal, as a function, the
stored labels of items a fixed few places away; correct code does that only when
it pairs an item with a later item's target on purpose, with both stored in
separate tensors (forecasting a class one step ahead), which this rule reads as a
shift: store such targets already aligned.

Not applicable when no DataLoader fed training, or the training data come from an
``IterableDataset``, files, or Python objects (no stored tensor of the dataset's
length: the source of the labels is out of sight). A ``TensorDataset`` built from
tensors that were misaligned before it is judged by what it stores: aligned.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "label-alignment"
TITLE = "labels belong to their inputs"
SYMPTOM_ID, SYMPTOM = "label-agreement", "labels served with the training inputs"

SHIFT = 3
OFFSETS = tuple(range(-SHIFT, SHIFT + 1))  # offsets from an item's index that are compared
FIRST_BATCHES = 2  # batches checked per pass ...
MAX_ROWS = 256  # ... up to this many rows per DataLoader
MIN_ROWS = 32  # matched rows to judge a loader
MIN_REPEATS = 16  # rows repeating a source value seen in an earlier row: the map was put to the test
AGREE = 0.98  # agreement of a label with a source for it to be a function of that source
MAX_LABEL_VALUES = 128  # values per row of a label (a one-hot vector) or of a label source
STANDARDISED = 8  # inputs with at least this many values per row are compared after standardising each row
MIN_SHARE, MARGIN = 1 / 3, 3  # a matched offset: this share of the rows, and this many times the next offset's votes
MAX_SOURCES = 16


@dataclass
class Observation:
    # per training DataLoader whose dataset stores tensors of its length: {"dataset", "batches" (checked),
    # "matched" (batches whose inputs were found among stored rows), "rows" (in matched batches), "input" (the stored
    # tensor the inputs matched), "offset" (the index offset they matched at), "pairs": [{"label" (batch element),
    # "source" (stored tensor), "agreement" and "repeated" (per offset in OFFSETS)}]}
    loaders: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # why other training DataLoaders could not be read
    trained_from_loaders: bool = False


class Observer:
    def __init__(self, session):
        self.session = session
        self.readers: dict[int, Reader] = {}
        self.seen: dict[int, int] = {}  # pass index -> batches yielded
        session.on(Event.BATCH, ID, self.on_batch)

    def on_batch(self, batch) -> None:
        observed = self.session.current
        k = self.seen.get(observed.index, 0)
        self.seen[observed.index] = k + 1
        if k >= FIRST_BATCHES or observed.order is None or k >= len(observed.order.head):
            return
        reader = self.readers.get(observed.loader)
        if reader is None:
            reader = self.readers[observed.loader] = Reader()
            reader.open(observed.ref() if observed.ref is not None else None)
        if reader.reason is None and reader.rows < MAX_ROWS:
            try:
                reader.add(batch, observed.order.head[k])
            except Exception as exc:  # data of a shape this rule does not read: say so, never fail the script for it
                reader.reason = f"a batch could not be compared with the dataset ({type(exc).__name__}: {exc})"

    def summary(self) -> Observation:
        from torch.utils.data import IterableDataset

        train = self.session.training_loaders()
        skipped: dict[str, None] = {}
        for p in self.session.passes:
            loader = p.ref() if p.loader in train and p.ref is not None else None
            if loader is not None and isinstance(loader.dataset, IterableDataset):
                skipped.setdefault(f"{type(loader.dataset).__name__} is an IterableDataset (no indices, no stored "
                                   "labels to compare)", None)
        loaders = []
        for key, reader in self.readers.items():
            if key not in train:
                continue
            try:
                summary = reader.summary() if reader.reason is None else None
            except Exception as exc:  # batches of a shape this rule does not read
                reader.reason = f"the batches could not be compared with the dataset ({type(exc).__name__}: {exc})"
                summary = None
            if summary is None:
                skipped.setdefault(reader.reason, None)
            else:
                loaders.append(summary)
        return Observation(loaders, list(skipped), bool(train))


class Reader:
    """What one DataLoader's checked batches showed, against the tensors its dataset stores."""

    def __init__(self):
        self.reason: str | None = None
        self.dataset, self.n, self.maps, self.stored, self.ragged = "", 0, [], {}, {}
        self.rows = self.batches = self.matched = 0
        self.offsets: dict[int, int] = {}  # matched input offset -> batches
        self.inputs: dict[str, int] = {}  # stored tensor the inputs matched -> batches
        self.labels: dict[str, list] = {}  # batch element -> its rows, per matched batch
        self.sources: dict[str, list] = {}  # stored tensor -> its rows at every offset, per matched batch
        self.elements: list[str] | None = None

    def open(self, loader) -> None:
        """Find the dataset behind the loader and the tensors it stores (or why they cannot be read)."""
        try:
            self._open(loader)
        except Exception as exc:  # a dataset of a shape this rule does not read
            self.reason = f"the training dataset could not be read ({type(exc).__name__}: {exc})"

    def _open(self, loader) -> None:
        from torch.utils.data import Subset

        if loader is None or loader.batch_sampler is None:
            self.reason = "a training DataLoader does not batch its items (batch_size=None)"
            return
        if loader.num_workers and not getattr(loader, "in_order", True):
            self.reason = "a training DataLoader may yield batches out of order (in_order=False)"
            return
        dataset = loader.dataset
        while isinstance(dataset, Subset):
            self.maps.append(dataset.indices)
            dataset = dataset.dataset
        self.dataset = type(dataset).__name__
        try:
            self.n = len(dataset)
        except TypeError:
            self.reason = f"{self.dataset} has no length"
            return
        self.stored = stored_tensors(dataset, self.n)
        self.ragged = ragged_sequences(dataset, self.n)
        if not self.stored and not self.ragged:
            self.reason = (f"{self.dataset} stores no tensor of its length (its items come from files, Python objects "
                           "or code): the labels' source is out of sight")

    def add(self, batch, indices: list) -> None:
        import torch

        elements = batch_elements(batch, len(indices))
        self.batches += 1
        names = [name for name, _ in elements]
        if self.elements is None:
            self.elements = names
            if len(names) < 2:
                self.reason = "a training DataLoader's batches hold no labels next to the inputs"
                return
        if names != self.elements or not all(isinstance(i, int) for i in indices):
            return
        try:
            for table in reversed(self.maps):
                indices = [int(table[i]) for i in indices]
        except (IndexError, TypeError):
            return
        index = torch.tensor(indices, dtype=torch.long) % self.n
        width = {name: t[0].numel() for name, t in elements}
        name, inputs = max(elements, key=lambda e: width[e[0]])  # the first of the widest
        found = [(match(inputs, self.stored[s], index), s) for s in self.stored
                 if self.stored[s][0].numel() == width[name] > 1]
        found = [(offset, s) for offset, s in found if offset is not None]
        if not found and inputs.dim() == 2 and inputs.shape[1] > 1:
            found = [(match_ragged(inputs, self.ragged[s], index), s) for s in self.ragged]
            found = [(offset, s) for offset, s in found if offset is not None]
        if not found:
            return
        offset, source = found[0]
        self.matched += 1
        self.rows += len(indices)
        self.offsets[offset] = self.offsets.get(offset, 0) + 1
        self.inputs[source] = self.inputs.get(source, 0) + 1
        items = (index + offset) % self.n
        positions = (items[:, None] + torch.tensor(OFFSETS)[None, :]) % self.n
        pointer = self.stored[source].untyped_storage().data_ptr() if source in self.stored else None
        for s, stored in self.stored.items():
            if s != source and stored.untyped_storage().data_ptr() != pointer \
                    and stored[0].numel() <= MAX_LABEL_VALUES:
                rows = stored[positions.reshape(-1).to(stored.device)].detach().cpu()
                self.sources.setdefault(s, []).append(rows.reshape(len(indices), len(OFFSETS), -1).double())
        for label, t in elements:
            if label != name and width[label] <= MAX_LABEL_VALUES:
                self.labels.setdefault(label, []).append(t.detach().cpu().reshape(len(indices), -1).double())

    def summary(self) -> dict:
        import torch

        pairs = []
        for label, chunks in self.labels.items():
            if len({c.shape[1] for c in chunks}) > 1:  # rows of varying width (padded per batch): not a class label
                continue
            returned = group_ids(torch.cat(chunks))
            for source, rows in self.sources.items():
                rows = torch.cat(rows)
                if len(rows) != len(returned):
                    continue
                columns = [group_ids(rows[:, j]) for j in range(len(OFFSETS))]
                pairs.append({"label": label, "source": source,
                              "agreement": [round(agreement(c, returned), 4) for c in columns],
                              "repeated": [len(c) - len(set(c)) for c in columns]})
        return {"dataset": self.dataset, "batches": self.batches, "matched": self.matched, "rows": self.rows,
                "input": max(self.inputs, key=self.inputs.get) if self.inputs else None,
                "offset": max(self.offsets, key=self.offsets.get) if self.offsets else None, "pairs": pairs}


def stored_tensors(dataset, n: int) -> dict:
    """The tensors (NumPy arrays, lists of numbers) a dataset holds as attributes, or in a tuple or list attribute
    (``TensorDataset.tensors``), whose first dimension is the dataset's length."""
    import torch

    found = {}
    for name, value in list(vars(dataset).items()) if hasattr(dataset, "__dict__") else []:
        held = [(f"{name}[{i}]", v) for i, v in enumerate(value[:MAX_SOURCES])] \
            if isinstance(value, (tuple, list)) and not numbers(value) else [(name, value)]
        for label, v in held:
            try:
                t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v) if numbers(v) or hasattr(v, "__array__") \
                    else None
            except (TypeError, ValueError, RuntimeError):
                continue
            if t is not None and t.layout == torch.strided and t.dim() >= 1 and t.shape[0] == n and n > 0 \
                    and not t.is_complex():
                found[label] = t
        if len(found) >= MAX_SOURCES:
            break
    return found


def ragged_sequences(dataset, n: int) -> dict:
    """The dataset's attributes that hold one variable-length sequence per item: a list or tuple of length ``n`` whose
    items are 1-D tensors or lists of numbers, not all of one length (judged by the first 64 items)."""
    import torch

    found = {}
    for name, value in list(vars(dataset).items()) if hasattr(dataset, "__dict__") else []:
        if not isinstance(value, (list, tuple)) or len(value) != n or n == 0:
            continue
        head = value[:64]
        if all(isinstance(v, torch.Tensor) and v.dim() == 1 and not v.is_complex() for v in head) \
                or all(numbers(v) for v in head):
            if len({len(v) for v in head}) > 1:
                found[name] = value
    return found


def match_ragged(inputs, sequences, index) -> int | None:
    """``match`` for a ragged store: each padded row against the sequences at index + k, on their own positions."""
    import torch

    size, width = inputs.shape
    rows = inputs.detach().cpu().double().tolist()  # plain floats: a few thousand tiny comparisons per batch
    n = len(sequences)
    stored: dict[int, list[float]] = {}

    def sequence(at: int) -> list[float]:
        if at not in stored:
            stored[at] = torch.as_tensor(sequences[at]).detach().cpu().double().reshape(-1).tolist()
        return stored[at]

    def gap(row: list[float], seq: list[float]) -> float:
        return sum((a - b) ** 2 for a, b in zip(row, seq))

    table = [[float("inf")] * len(OFFSETS) for _ in range(size)]
    for i, at in enumerate(torch.as_tensor(index).reshape(-1).tolist()[:size]):
        for j, k in enumerate(OFFSETS):
            seq = sequence((int(at) + k) % n)
            length = len(seq)
            if length == 0 or length > width:
                continue
            nearest = min(gap(rows[i][:length], seq), gap(rows[i][width - length:], seq))
            table[i][j] = nearest + 1e-9 * (width - length)  # of two exact matches, the longer is the item
    distance = torch.tensor(table, dtype=torch.float64)
    if not torch.isfinite(distance).any():
        return None
    nearest = distance.min(1, keepdim=True).values
    voters = ((distance == nearest).sum(1) == 1) & torch.isfinite(nearest.reshape(-1))
    votes = torch.bincount(distance.argmin(1)[voters], minlength=len(OFFSETS)).tolist()
    ranked = sorted(range(len(OFFSETS)), key=lambda j: -votes[j])
    first, second = votes[ranked[0]], votes[ranked[1]]
    return OFFSETS[ranked[0]] if first >= MIN_SHARE * size and first >= MARGIN * second else None


def numbers(value) -> bool:
    """A list or tuple of Python numbers (judged by its first item)."""
    return isinstance(value, (list, tuple)) and bool(value) and isinstance(value[0], (int, float))


def batch_elements(batch, size: int) -> list:
    """The batch's tensors with one row per item: ``(x, y)`` → ``[("[0]", x), ("[1]", y)]``; a dict's by key."""
    import torch

    if isinstance(batch, dict):
        items = [(f"[{key!r}]", value) for key, value in batch.items()]
    elif isinstance(batch, (tuple, list)):
        items = [(f"[{i}]", value) for i, value in enumerate(batch)]
    else:
        items = [("batch", batch)]
    return [(name, t) for name, t in items if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == size
            and not t.is_complex()]


def match(inputs, stored, index) -> int | None:
    """The offset k at which the returned inputs are the stored rows at index + k (see the module docstring)."""
    import torch

    size = len(index)
    positions = (index[:, None] + torch.tensor(OFFSETS)[None, :]) % len(stored)
    candidates = stored[positions.reshape(-1).to(stored.device)].detach().cpu().reshape(size, len(OFFSETS), -1).double()
    rows = inputs.detach().cpu().reshape(size, 1, -1).double()
    if rows.shape[-1] >= STANDARDISED:
        rows, candidates = standardised(rows), standardised(candidates)
    distance = ((rows - candidates) ** 2).sum(-1)
    nearest = distance.min(1, keepdim=True).values
    voters = (distance == nearest).sum(1) == 1  # exact ties (duplicate rows) do not vote
    votes = torch.bincount(distance.argmin(1)[voters], minlength=len(OFFSETS)).tolist()
    ranked = sorted(range(len(OFFSETS)), key=lambda j: -votes[j])
    first, second = votes[ranked[0]], votes[ranked[1]]
    return OFFSETS[ranked[0]] if first >= MIN_SHARE * size and first >= MARGIN * second else None


def standardised(rows):
    centred = rows - rows.mean(-1, keepdim=True)
    return centred / centred.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def group_ids(rows) -> list[int]:
    """Equal rows get equal ids (exactly: no rounding, no hashing)."""
    import torch

    rows = rows.reshape(len(rows), -1)
    if rows.shape[1] == 1:  # one value per row (a class index): the faster path
        return torch.unique(rows.reshape(-1), return_inverse=True)[1].tolist()
    return torch.unique(rows, dim=0, return_inverse=True)[1].tolist()


def agreement(keys: list[int], returned: list[int]) -> float:
    """The share of rows whose returned label is the most common one among rows with the same key."""
    counts: dict[int, dict[int, int]] = {}
    for key, value in zip(keys, returned):
        row = counts.setdefault(key, {})
        row[value] = row.get(value, 0) + 1
    return sum(max(row.values()) for row in counts.values()) / max(1, len(keys))


# -- the judge -------------------------------------------------------------------


def explains(pair: dict, j: int) -> bool:
    return pair["agreement"][j] >= AGREE and pair["repeated"][j] >= MIN_REPEATS


ZERO = OFFSETS.index(0)


def read(loader: dict) -> dict:
    """Each label candidate of a loader, classified: "aligned" (pairs explaining a label at offset 0), "powered" (of
    those, pairs under which a shift would have shown), "shifted" ((pair, offset) for labels explained only at
    another offset) and "unexplained" (labels no source explains at any offset)."""
    found: dict = {"aligned": [], "powered": [], "shifted": [], "unexplained": []}
    for label in dict.fromkeys(p["label"] for p in loader["pairs"]):
        pairs = [p for p in loader["pairs"] if p["label"] == label]
        at_zero = [p for p in pairs if explains(p, ZERO)]
        elsewhere = [(p, OFFSETS[j]) for p in pairs for j in range(len(OFFSETS)) if j != ZERO and explains(p, j)]
        if at_zero:
            found["aligned"] += at_zero
            found["powered"] += [p for p in at_zero if any(a < AGREE for j, a in enumerate(p["agreement"]) if j != ZERO)]
        elif elsewhere:
            found["shifted"].append(min(elsewhere, key=lambda e: abs(e[1])))
        else:
            found["unexplained"].append(label)
    return found


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.loaders:
        if obs.skipped:
            why = "; ".join(obs.skipped)
        elif obs.trained_from_loaders:
            why = "the training DataLoader's batches were not drawn by index from a dataset"
        else:
            why = "no DataLoader fed training (batches were made another way): no dataset to compare labels with"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why)
    judged = [d for d in obs.loaders if d["rows"] >= MIN_ROWS]
    readings = [(d, read(d)) for d in judged]
    failing = [(d, r) for d, r in readings if r["shifted"] and not r["aligned"]]
    if failing:
        d, r = failing[0]
        pair, offset = r["shifted"][0]
        at_zero = pair["agreement"][ZERO]
        seen = (f"the labels served with {d['dataset']}'s training inputs agreed with the labels it stores for "
                f"those same inputs in only {at_zero:.0%} of {d['rows']} rows checked")
        place = f"{abs(offset)} place{'s' if abs(offset) > 1 else ''} {'after' if offset > 0 else 'before'}"
        return Finding(ID, TITLE, FAIL, f"{at_zero:.0%} agree", f"≥ {AGREE:.0%}",
                       f"{seen}, but {pair['agreement'][OFFSETS.index(offset)]:.0%} with the stored label of the "
                       f"item {place} ({pair['source']}, batch element {pair['label']}): the dataset pairs each input "
                       "with another item's label, so the loss is computed against the wrong labels and the model "
                       "cannot learn", observed=seen)
    mixed = [(d, r) for d, r in readings if r["shifted"]]
    if mixed:
        d, r = mixed[0]
        why = (f"in {d['dataset']}'s batches, element {r['aligned'][0]['label']} matched the labels stored for the "
               f"same inputs but element {r['shifted'][0][0]['label']} matched those stored for other items: a "
               "deliberate pairing (a previous or next label served as well) cannot be told from a misplaced one")
        return Finding(ID, TITLE, CANNOT_TELL, "", f"≥ {AGREE:.0%}", why, observed=why)
    powered = [(d, r["powered"][0]) for d, r in readings if r["powered"]]
    if powered:
        d, pair = powered[0]
        rows = sum(r["rows"] for r, _ in readings)
        return Finding(ID, TITLE, PASS, f"{pair['agreement'][ZERO]:.0%} agree", f"≥ {AGREE:.0%}",
                       f"each training label checked was a function of the label {d['dataset']} stores for the same "
                       f"item ({pair['source']}; {rows} rows checked)",
                       observed=f"each training label checked matched the label stored with its input ({rows} rows)")
    if not judged:
        d = max(obs.loaders, key=lambda d: d["rows"])
        why = (f"the training inputs matched no rows {d['dataset']} stores (inputs transformed, or built on the fly)"
               if not d["matched"] else f"only {d['rows']} rows were matched to stored items (at least {MIN_ROWS} "
                                        "needed)")
    else:
        d, r = readings[0]
        if not d["pairs"]:
            why = f"{d['dataset']} stores no tensor besides the inputs that could hold labels"
        elif r["unexplained"]:
            why = (f"no stored tensor of {d['dataset']} predicts the labels served ({', '.join(r['unexplained'])}) "
                   "for the same item or a nearby one")
        else:
            why = (f"the labels {d['dataset']} stores would look the same for neighbouring items (too few distinct "
                   "values in the rows checked)")
    return Finding(ID, TITLE, CANNOT_TELL, "", f"≥ {AGREE:.0%}", why, observed=why)
