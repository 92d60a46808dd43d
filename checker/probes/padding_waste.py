"""padding-waste: training batches of variable-length sequences spend little compute on padding.

A batch of sequences of different lengths is padded to one width; every padded
position costs the same compute as a real token (attention, feed-forward, the
recurrent steps) and teaches nothing. Two choices decide how much is wasted: the
width each batch is padded to (its own longest sequence, or a global maximum) and
which sequences share a batch (random, or grouped by length).

Observed. Each batch a training DataLoader yields (at most ``MAX_BATCHES`` per
pass, ``MAX_PASSES`` passes per loader): its first two-dimensional integer tensor
whose values are not all 0/1 (the token ids), and a tensor of the same shape that
is boolean or holds only 0/1 (an attention or key padding mask). The padding id
is, in order: the token value found at every masked-out position (the mask tells
which positions are padding), else the ``padding_idx`` of an ``nn.Embedding`` of
a trained model, else the value at the end of most rows when it forms a trailing
run in each (inferred). The batch dimension is the one as long as the batch's
labels, else the one across which every row's real tokens form one run at its
start or end (the first dimension when both do); a row's length is its number of
non-padding tokens. Nothing is run again and no random number of
the script is drawn: the tensors the loop received are read once.

Figures, over the judged batches (the training passes of each loader):

* ``padded``: the share of the batches' positions that are padding;
* ``batch-max``: that share had each batch been padded to its own longest row;
* ``grouped``: that share for a length-grouped order of the same lengths (those of
  one whole pass, with the same batch size): shuffled, sorted within mega-batches
  of ``MEGA`` batches, cut into batches, each padded to its longest row; the mean
  of ``SIMULATIONS`` fixed seeds (computed in the judge, deterministic).

Rules. *Width*: a batch may be padded to its longest row rounded up to a multiple
of ``ROUND`` (8: tensor-core friendly widths, ``pad_to_multiple_of=8``); fails when
positions beyond that width are more than ``EXCESS`` = 10 % of all positions.
*Grouping*: fails when a length-grouped order of the same sequences would need at
least ``SAVING`` = 25 % fewer positions than the batches as drawn, each padded to
its own longest row: ``1 - (1 - batch-max) / (1 - grouped) >= 0.25`` (for the same
real tokens, positions scale as ``1 / (1 - share)``), and the batch-max share is at
least ``RATIO`` = 3 times the grouped one. The curriculum's measurement (random
batching 61 % padding, length-grouped 9 %) is a saving of 57 %; it quotes 30-50 %
as typical.

Measured (shares of positions that are padding; saving as above):

=====================================================  =======  =========  =======  ===========
script                                                 padded   batch-max  grouped  rule
=====================================================  =======  =========  =======  ===========
``text`` reference (sequences of 4..24, batches of 32)  8.1 %    8.1 %      8.0 %    saving 0 %
``text`` padded to ``MAX_LEN`` (pad-global)             40.8 %   8.1 %      8.0 %    excess 24 %
``text`` shuffled at random (no-grouping)              40.0 %   40.0 %     8.0 %    saving 35 %
``corpus/hf_tokenizer_gru`` (sortish sampler, 3..40)   16.6 %   16.6 %     10.6 %   saving 7 %
... ``padding="max_length"`` (48)                      55.0 %   16.6 %     10.6 %   excess 42 %
... ``shuffle=True``                                   42.8 %   42.8 %     10.8 %   saving 36 %
kit, random batches of 16 (4..24 tokens)               39.1 %   39.1 %     7.9 %    saving 34 %
``corpus/hf_dataclass`` (random batches of 16, 6..23)  35.9 %   35.9 %     7.0 %    saving 31 %
two ``text``-like fixtures (random batches of 32)      33.7 %   33.7 %     6.4 %    saving 29 %
kit, random batches of 4                               30.6 %   30.6 %     6.4 %    saving 26 %
``corpus/token_transformer`` (random, 10..19 tokens)   23.1 %   23.1 %     4.8 %    saving 19 %
kit, width rounded up to a multiple of 8 (grouped)     21.5 %   7.8 %      7.7 %    excess 0 %
kit, width rounded up to a multiple of 64 (grouped)    78.0 %   7.8 %      7.7 %    excess 72 %
kit, buckets of 5 tokens                               12.6 %   12.6 %     7.9 %    saving 5 %
kit, sorted once, never reshuffled                     2.8 %    2.8 %      8.1 %    saving 0 %
=====================================================  =======  =========  =======  ===========

Random batching of lengths that vary four- to thirteen-fold saves 26-36 % when
grouped and fails; lengths within a factor of two (the tutorial's 10..19) save
about 19 % and pass. The threshold sits between those two classes of data, not
between two scripts; the curriculum's own figures (61 % against 9 %) save 57 %.

Why a correct script does not fail. Padding to the batch's longest row (with
``pad_sequence``, by hand, or rounded up to a multiple of 8) leaves no excess
width. A sampler that groups lengths (mega-batches sorted by any key that follows
length, buckets, a library's bucketing sampler) reaches the grouped figure or
better. A dataset too small, or lengths too uniform, for grouping to help gives a
grouped figure close to the observed one: the rule compares with what grouping
achieves on the same lengths, never with a constant. Random batching of lengths
that vary widely does fail: that waste is what this probe measures.

Not applicable when no DataLoader fed training, when no training batch held a
two-dimensional integer tensor (fixed-size features, packed sequences), or when
every row had the same length (nothing to pad), or when no padding id could be
found (no mask, no ``padding_idx`` that occurs, no trailing run: fixed-length
sequences).

A loader every judged pass of which packed its padded batches (``pack_padded_sequence``
ran during the pass) passes whatever its padding: the recurrent layers skip the padded
positions, and what is left on them (an embedding lookup) costs little. A collate
function that returns a ``PackedSequence`` is not applicable (no token tensor).
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS, Finding

ID = "padding-waste"
TITLE = "little compute spent on padding"
ADVISES = True  # waste is a cost, not an error: above its threshold the finding is advice and the check passes
SYMPTOM_ID, SYMPTOM = "padding-share", "share of padding in the training batches"
MAX_BATCHES = 512  # batches read per pass
MAX_PASSES = 3  # passes read per loader
MAX_ELEMENTS = 4_000_000  # token positions kept in all
ROUND = 8  # a width rounded up to a multiple of this is not waste
EXCESS = 0.10  # share of positions beyond the rounded batch width above which the width rule fails
MEGA = 8  # batches per mega-batch in the simulated length-grouped order
SIMULATIONS = 5
SAVING = 0.25  # share of the positions grouping would save above which the grouping rule fails
RATIO = 3.0  # ... and the batch-max padding share must be at least this many times the grouped one


@dataclass
class Observation:
    # per training DataLoader with token batches: {"pad": the padding id, "source": "mask" | "padding_idx" |
    # "trailing", "passes": [[[width, [lengths]], ...] per pass]}
    loaders: list[dict] = field(default_factory=list)
    token_batches: bool = False  # some training batch held a 2-D integer tensor
    trained_from_loaders: bool = False
    packed: int = 0  # training loaders whose every judged pass packed its batches (pack_padded_sequence)


class Observer:
    def __init__(self, session):
        self.session = session
        self.kept: dict[int, list] = {}  # loader key -> [(pass index, tokens, mask or None, labels count)]
        self.passes: dict[int, dict[int, int]] = {}  # loader -> pass index -> batches kept
        self.elements = 0
        self.models: set[int] = set()  # top-level modules whose embeddings were read
        self.pads: list[int] = []  # their embeddings' padding_idx
        session.on(Event.BATCH, ID, self.on_batch)
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.PACKED, ID, self.on_packed)
        self.packed: set[int] = set()  # passes during which a padded batch was packed

    def on_packed(self) -> None:
        if self.session.current is not None:
            self.packed.add(self.session.current.index)

    def on_forward(self, forward) -> None:
        if forward.module in self.models or not self.kept:
            return
        self.models.add(forward.module)
        model = forward.ref() if forward.ref is not None else None
        if model is not None:
            self.pads += [p for p in embedding_pads(model) if p not in self.pads]

    def on_batch(self, batch) -> None:
        import torch

        from checker.tensors import tensors_in

        observed = self.session.current
        if observed is None or self.elements > MAX_ELEMENTS:
            return
        seen = self.passes.setdefault(observed.loader, {})
        if observed.index not in seen and len(seen) >= MAX_PASSES or seen.get(observed.index, 0) >= MAX_BATCHES:
            return
        tensors = tensors_in(batch)
        tokens = next((t for t in tensors if t.dim() == 2 and t.numel() and not t.dtype.is_floating_point
                       and t.dtype != torch.bool and not t.is_complex() and int(t.max()) > 1), None)
        if tokens is None:
            return
        mask = next((t for t in tensors if t is not tokens and t.shape == tokens.shape and is_mask(t)), None)
        seen[observed.index] = seen.get(observed.index, 0) + 1
        labels = self.session.labels
        small = int(tokens.max()) < 2**31 and int(tokens.min()) >= -2**31  # kept as int32: half the memory
        self.kept.setdefault(observed.loader, []).append(
            (observed.index, tokens.detach().to("cpu", torch.int32 if small else torch.int64, copy=True),
             None if mask is None else mask.detach().to("cpu").bool(),
             None if labels is None else int(labels.numel())))
        self.elements += tokens.numel()

    def summary(self) -> Observation:
        train = self.session.training_loaders()
        pads = self.pads
        obs = Observation(trained_from_loaders=bool(train))
        for loader, kept in self.kept.items():
            if loader not in train:
                continue
            obs.token_batches = True
            if all(index in self.packed for index, *_ in kept):  # the recurrent layers skip the padding
                obs.packed += 1
                continue
            found = padding_id(kept, pads)
            if found is None:  # no padding id: fixed-length sequences, nothing to judge
                continue
            pad, source = found
            passes: dict[int, list] = {}
            for index, tokens, _, n in kept:
                passes.setdefault(index, []).append(measure(tokens, pad, n))
            obs.loaders.append({"pad": pad, "source": source, "passes": list(passes.values())})
        return obs


def is_mask(t) -> bool:
    import torch

    if t.dtype == torch.bool:
        return True
    return not t.is_complex() and bool(((t == 0) | (t == 1)).all())


def embedding_pads(model) -> list[int]:
    """The ``padding_idx`` of every embedding in a model."""
    from torch import nn

    if not isinstance(model, nn.Module):
        return []
    return [m.padding_idx % m.num_embeddings for m in model.modules()
            if isinstance(m, nn.Embedding) and m.padding_idx is not None]


def padding_id(kept: list, pads: list[int]) -> tuple[int, str] | None:
    """The padding id of a loader's token batches: from a mask, an embedding's padding_idx, or trailing runs."""
    import torch

    for _, tokens, mask, _ in kept:
        if mask is None:
            continue
        for pad_side in (~mask, mask):
            values = tokens[pad_side]
            if values.numel() and bool((values == values[0]).all()) and not bool((tokens[~pad_side] == values[0]).all()):
                return int(values[0]), "mask"
    for pad in pads:
        if any(bool((tokens == pad).any()) for _, tokens, _, _ in kept):
            return pad, "padding_idx"
    last = Counter(int(v) for _, tokens, _, _ in kept for v in torch.cat([tokens[:, -1], tokens[-1, :]]).tolist())
    if last:
        value, count = last.most_common(1)[0]
        total = sum(last.values())
        if count * 2 >= total and any(bool((tokens == value).any()) for _, tokens, _, _ in kept):
            return value, "trailing"
    return None


def measure(tokens, pad: int, labels: int | None) -> list:
    """[width, lengths of the rows] of one batch: the batch dimension by the labels' count, else the dimension
    along which the real tokens of each row do not form a contiguous run."""
    real = tokens != pad
    a, b = tokens.shape
    if labels == a and labels != b:
        batch_dim = 0
    elif labels == b and labels != a:
        batch_dim = 1
    else:
        batch_dim = 1 if contiguous(real.T) and not contiguous(real) else 0
    rows = real if batch_dim == 0 else real.T
    return [int(rows.shape[1]), rows.sum(1).tolist()]


def contiguous(real) -> bool:
    """Whether the real positions of every row form one run at its start or its end."""
    n = real.sum(1, keepdim=True)
    import torch

    pos = torch.arange(real.shape[1])
    return bool(((real == (pos < n)).all(1) | (real == (pos >= real.shape[1] - n)).all(1)).all())


# -- the judge (no torch) ---------------------------------------------------------------------------------------


def round_up(n: int, k: int = ROUND) -> int:
    return -(-n // k) * k


def grouped_share(lengths: list[int], batch: int, seeds: int = SIMULATIONS) -> float:
    """Padding share of a length-grouped order of ``lengths``: shuffled, sorted within mega-batches of ``MEGA``
    batches, cut into batches of ``batch``, each padded to its longest; the mean over fixed seeds."""
    shares = []
    for seed in range(seeds):
        order = list(lengths)
        random.Random(seed).shuffle(order)
        cells = 0
        for start in range(0, len(order), MEGA * batch):
            chunk = sorted(order[start:start + MEGA * batch])
            cells += sum(max(chunk[i:i + batch]) * len(chunk[i:i + batch]) for i in range(0, len(chunk), batch))
        shares.append(1 - sum(lengths) / cells)
    return sum(shares) / len(shares)


def figures(loader: dict) -> dict | None:
    """padded / batch-max / excess / grouped shares of a loader's judged batches; None when nothing was padded."""
    batches = [(w, [n for n in lengths if n > 0]) for p in loader["passes"] for w, lengths in p]
    batches = [(w, lengths) for w, lengths in batches if lengths]
    if not batches:
        return None
    real = sum(sum(lengths) for _, lengths in batches)
    cells = sum(w * len(lengths) for w, lengths in batches)
    own = sum(max(lengths) * len(lengths) for _, lengths in batches)
    beyond = sum(max(0, w - round_up(max(lengths))) * len(lengths) for w, lengths in batches)
    distinct = {n for _, lengths in batches for n in lengths}
    full = max(loader["passes"], key=lambda p: sum(len(lengths) for _, lengths in p))
    lengths = [n for _, row in full for n in row if n > 0]
    size = Counter(len(row) for _, row in full).most_common(1)[0][0]
    return {"padded": 1 - real / cells, "batch_max": 1 - real / own, "excess": beyond / cells,
            "grouped": grouped_share(lengths, size), "batches": len(batches), "rows": len(lengths), "batch": size,
            "uniform": len(distinct) == 1 and cells == real}


def per_batch(loader: dict, most: int = 200) -> dict[str, list]:
    """The padding share of each judged batch (the first ``most``), as padded and at its own longest row."""
    rows = [(w, [n for n in lengths if n > 0]) for p in loader["passes"] for w, lengths in p][:most]
    rows = [(w, lengths) for w, lengths in rows if lengths]
    return {"padded": [round(1 - sum(n) / (w * len(n)), 4) for w, n in rows],
            "own_longest": [round(1 - sum(n) / (max(n) * len(n)), 4) for w, n in rows]}


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.token_batches:
        why = ("no training DataLoader yielded a batch with a two-dimensional integer tensor (token ids): there is no "
               "padding to measure" if obs.trained_from_loaders
               else "no DataLoader fed training: there are no collated batches to measure")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    measured = [(f, loader) for loader in obs.loaders if (f := figures(loader)) is not None]
    if not measured and obs.packed:
        seen = ("the padded training batches were packed (pack_padded_sequence) before the recurrent layers, which "
                "then skip the padded positions: the padding costs them no compute")
        return Finding(ID, TITLE, PASS, "packed", "packed, or little padding", seen, observed=seen)
    if not measured:
        why = ("no padding was found in the token batches: no mask of the tokens' shape, no embedding padding_idx "
               "that occurs in them, and no value trailing most rows (fixed-length sequences)")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    if all(f["uniform"] for f, _ in measured):
        why = "every training sequence had the same length and nothing was padded"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    f, loader = max(measured, key=lambda m: m[0]["padded"])
    series = per_batch(loader)
    figure = f"{pct(f['padded'])} padding (own longest {pct(f['batch_max'])}, grouped {pct(f['grouped'])})"
    seen = (f"{pct(f['padded'])} of the token positions in {f['batches']} training batches were padding (id "
            f"{loader['pad']}, from the {loader['source'].replace('_', ' ')}); padded to each batch's longest row "
            f"it would be {pct(f['batch_max'])}, and with batches grouped by length {pct(f['grouped'])}")
    if f["excess"] > EXCESS:
        return Finding(ID, TITLE, ADVICE, figure, f"≤ {pct(EXCESS)} beyond own longest",
                       f"{seen}. {pct(f['excess'])} of the positions lie beyond the width each batch needs (its "
                       f"longest row, rounded up to a multiple of {ROUND}): the batches are padded to a fixed or "
                       "global maximum length. Pad each batch to its own longest sequence (pad_sequence, or "
                       "torch.full with the batch's max length)", series=series, observed=seen)
    saving = 1 - (1 - f["batch_max"]) / (1 - f["grouped"])
    threshold = f"grouping saves < {pct(SAVING)}"
    if saving >= SAVING and f["batch_max"] >= RATIO * f["grouped"]:
        return Finding(ID, TITLE, ADVICE, figure, threshold,
                       f"{seen}. Grouping by length would need {pct(saving)} fewer positions for the same "
                       "sequences: the batches mix short and long sequences at random. Batch sequences of similar "
                       "length together (a length-grouped batch sampler: shuffle, sort within mega-batches, shuffle "
                       "the batches; reshuffled each epoch)", series=series, observed=seen)
    return Finding(ID, TITLE, PASS, figure, threshold,
                   f"{seen}: no position beyond each batch's longest row, and grouping by length would save "
                   f"{pct(max(saving, 0.0))}", series=series, observed=seen)
