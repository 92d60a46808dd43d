"""What a planted script's run shows, measured beside the correct script's run, and the difficulty that follows.

Each run (under `kata check`) is reduced to what a learner would see when running it (the loss and accuracy
figures it prints, an error that stops it, NaN, how long it takes) and to what a measurement shows (each flagged
check's symptom, never its cause): a :class:`Measured`. :func:`describe` compares the kata's with the correct
script's: where the printed output differs visibly, the kata is easy and the observation says what differs, with
the figures; where it does not, the observation says so, with the figures, then what the measurement shows, and
the kata is never easy. Nothing here imports torch: `kata new` reads it in its own process.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from katas.catalogue import DIFFICULTIES

if TYPE_CHECKING:
    from checker.verdict import Report

LEVELS = tuple(DIFFICULTIES)  # easiest first
KEPT = 12  # printed values kept per figure (the last ones)
LOSS_RATIO = 2.0  # a printed loss differs visibly when it ends at twice (or half) the correct script's ...
LOSS_FLOOR = 0.05  # ... and at least this far from it
ACCURACY_GAP = 0.1  # a printed accuracy differs visibly when it ends this far from the correct script's
SLOWER = 5.0  # a run takes visibly longer at this many times the correct script's time (wall clock: noisy) ...
SLOWER_BY = 30.0  # ... and at least this many seconds more
ERROR_CHARS = 160  # of an error shown

# A printed number: after a space, a colon, an equals sign, a slash or an opening bracket (not a digit of a name: acc1,
# top5).
NUMBER = re.compile(r"(?:(?<=[\s:=(\[,|/])|^)(?P<value>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf))"
                    r"(?![\w.])(?P<percent>\s*%)?", re.IGNORECASE)
WORD = re.compile(r"[a-z]+")
LABEL = re.compile(r"(?:[A-Za-z][\w@/.\- ]*?)?(?=[\s:=(\[,|]*$)")  # the words right before a number (acc@1, val_loss)
ACCURACY_WORDS = {"acc", "accuracy", "accu"}
LOSS_WORDS = {"loss", "nll", "ppl", "perplexity", "cost"}
VALUE_WORDS = {"reward", "rewards", "return", "returns"}  # a figure of merit that is neither (an agent's reward)
PHASES = {"train", "training", "val", "valid", "validation", "test", "eval", "dev"}  # alone: that phase's loss
RATIO = re.compile(r"\s*/\s*")  # between the two numbers of ``9800/10000``
ASIDE = re.compile(r"\s*\(\s*")  # between a ratio and the same in percent: ``9800/10000 (98%)``
COUNTED = re.compile(r"\s+[A-Za-z]")  # after a whole number that counts something: ``10000 test images``
BARE = re.compile(r"[\s,;|]*")  # what separates the numbers of a line of numbers alone (``print(epoch, loss)``; a
# printed tensor's or list's rows, in brackets, are no figures)


class Kind(str, Enum):
    LOSS = "loss"
    ACCURACY = "accuracy"
    VALUE = "value"  # a reward, or a number printed without a label: compared as a loss is, never called one


class Shows(str, Enum):
    """What differs visibly from the correct script's run, in what the script itself shows."""

    ERROR = "error"  # it stops (an exception, a crash, a timeout)
    PRINTED = "printed"  # a printed loss, accuracy or reward: clearly other figures, NaN or inf
    SLOWER = "slower"


@dataclass(frozen=True)
class Printed:
    """One figure a script prints, as it prints it (``train``, ``val accuracy``), with its values in order."""

    label: str
    kind: Kind
    values: tuple[float, ...]
    percent: bool = False
    key: str = ""  # what matches it in another run's output (see :func:`key_of`)

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in self.values)

    def shown(self) -> str:
        """Its values as the observation gives them: ``1.13, 0.37, 0.28, 0.25`` (the first two and the last two of
        more than six)."""
        values = [self._shown(v) for v in self.values]
        return ", ".join(values if len(values) <= 6 else [*values[:2], "...", *values[-2:]])

    def _shown(self, value: float) -> str:
        if not math.isfinite(value):
            return str(value)
        if self.percent:
            return f"{value:.1f}%"
        if self.kind is Kind.ACCURACY and abs(value) <= 1.5:
            return f"{value:.3f}"
        return number(value)


def printed(output: str) -> tuple[Printed, ...]:
    """The loss, accuracy and reward figures in a script's output, each by its label, in the order first printed.

    A number's label is the text between it and the number before it on its line (``epoch 0  train 1.13  acc
    0.96``: train, acc). A label with an accuracy word is an accuracy; one with a loss word, or only a phase's
    name (train, val, test), a loss; one with a reward word, a value; anything else (epoch, lr, step) is not a
    figure read here. ``Accuracy: 9800/10000`` is the ratio 0.98; a whole number followed by words is a count
    inside a longer label (``Accuracy of the network on the 10000 test images: 54 %``: the accuracy is 54 %).
    On a line of numbers alone (``print(epoch, loss)``), each column with a decimal point is a value of its own.
    """
    found: dict[str, tuple[str, Kind, list[float], bool]] = {}

    def add(label: str, kind: Kind, value: float, percent: bool, key: str | None = None) -> None:
        entry = found.setdefault(key or key_of(label), (label, kind, [], percent))
        entry[2].append(value)

    for line in output.splitlines():
        matches = list(NUMBER.finditer(line))
        if len(matches) >= 2 and all(BARE.fullmatch(line, a.end() if a else 0, b.start())
                                     for a, b in zip([None, *matches], matches)) and BARE.fullmatch(line[matches[-1].end():]):
            for column, match in enumerate(matches, 1):
                if not whole(match["value"]):
                    add(f"{ordinal(column)} number of a line of bare numbers", Kind.VALUE, float(match["value"]),
                        bool(match["percent"]), f"bare {column}")
            continue
        labels = [LABEL.search(line, a.end() if a else 0, b.start())[0] for a, b in zip([None, *matches], matches)]
        keys = [key_of(label) for label in labels]  # a label read on past a count keeps a key without it
        skip = set()
        for i, match in enumerate(matches):
            if i in skip:
                continue
            label, value = labels[i], float(match["value"])
            kind = kind_of(WORD.findall(label.lower()))
            following = matches[i + 1] if i + 1 < len(matches) else None
            if following is not None and RATIO.fullmatch(line, match.end(), following.start()):
                skip.add(i + 1)  # N/M: a ratio (9800/10000), or a position (epoch [1/5], batch 20/300)
                if kind is not Kind.ACCURACY or not float(following["value"]):
                    continue
                value = value / float(following["value"])
                aside = matches[i + 2] if i + 2 < len(matches) else None
                if aside is not None and aside["percent"] and ASIDE.fullmatch(line, following.end(), aside.start()):
                    skip.add(i + 2)  # the same accuracy in percent, in brackets: a figure of its own (9800/10000 (98%))
                    add(f"{label} (%)", kind, float(aside["value"]), True, f"{keys[i]} percent")
            elif (kind is not None and following is not None and whole(match["value"]) and not match["percent"]
                  and COUNTED.match(line, match.end())
                  and kind_of(WORD.findall(labels[i + 1].lower())) is None):
                labels[i + 1] = f"{label} {match['value']} {labels[i + 1].strip(' :=')}".strip()  # a count: read on
                keys[i + 1] = f"{keys[i]} {keys[i + 1]}".strip()  # (``Cost at epoch 3 is 2.30``: one figure)
                continue
            if kind is not None:
                add(label, kind, value, bool(match["percent"]), keys[i])
    return tuple(Printed(label, kind, tuple(values[-KEPT:]), percent, key)
                 for key, (label, kind, values, percent) in found.items())


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def whole(literal: str) -> bool:
    """A number printed without a decimal point or an exponent: a count, an epoch, a step."""
    return literal.lstrip("+-").isdigit()


def key_of(label: str) -> str:
    """What matches a label in another run's output: ``Val_Acc@1`` → ``val acc 1``."""
    return " ".join(re.findall(r"[a-z0-9]+", label.lower()))


def kind_of(words: list[str]) -> Kind | None:
    if ACCURACY_WORDS & set(words):
        return Kind.ACCURACY
    if any(loss in word for word in words for loss in LOSS_WORDS) or (words and set(words) <= PHASES):
        return Kind.LOSS
    if VALUE_WORDS & set(words):
        return Kind.VALUE
    return None


@dataclass(frozen=True)
class Measured:
    """What one run showed: how it ended, what it printed, the loss its training computed, its flagged checks."""

    ran: bool  # ran to its end and was judged
    problem: str  # why it did not (the script's error, a timeout); empty when it ran
    printed: tuple[Printed, ...]
    losses: tuple[float, float] | None  # the mean loss per backward pass of its first and last fifth, as measured
    seconds: float
    symptoms: tuple[tuple[str, str], ...]  # each flagged check (a criterion of one of several): (what it looks at,
    # what it saw)

    @classmethod
    def of(cls, report: Report) -> Measured:
        return cls(report.verdict.ran, "" if report.verdict.ran else report.problem, printed(report.output),
                   loss_ends(report), round(report.seconds, 1), symptoms(report))

    def to_json(self) -> dict:
        return {"ran": self.ran, "problem": self.problem,
                "printed": [{"label": p.label, "kind": p.kind.value, "values": list(p.values), "percent": p.percent,
                             "key": p.key}
                            for p in self.printed],
                "losses": list(self.losses) if self.losses else None, "seconds": self.seconds,
                "symptoms": [list(symptom) for symptom in self.symptoms]}

    @classmethod
    def from_json(cls, doc: dict) -> Measured:
        return cls(doc["ran"], doc["problem"], tuple(Printed(p["label"], Kind(p["kind"]), tuple(p["values"]),
                                                              p["percent"], p["key"]) for p in doc["printed"]),
                   tuple(doc["losses"]) if doc["losses"] else None, doc["seconds"],
                   tuple((title, seen) for title, seen in doc["symptoms"]))

    def figure(self, key: str) -> Printed | None:
        return next((p for p in self.printed if p.key == key), None)


def loss_ends(report: Report) -> tuple[float, float] | None:
    """The mean training loss of the first and the last fifth of the backward passes, as the checker saw them
    (the series of the check on finite losses), rounded to three significant digits."""
    series = next((f.series.get("loss per backward") for f in report.findings if f.probe == "non-finite"), None)
    if not series:
        return None
    series = [math.nan if loss is None else loss for loss in series]  # a non-finite loss is kept as null
    fifth = max(1, len(series) // 5)
    return _rounded(sum(series[:fifth]) / fifth), _rounded(sum(series[-fifth:]) / fifth)


def _rounded(value: float) -> float:
    return float(f"{value:.3g}") if math.isfinite(value) else value


def symptoms(report: Report) -> tuple[tuple[str, str], ...]:
    """Each flagged check, named by what it looks at, with what it saw: never the cause. A check of several
    criteria (training health) gives each flagged criterion."""
    from checker.verdict import symptom_title

    said = []
    for finding in report.findings:
        if not finding.flagged:
            continue
        title = symptom_title(finding.probe)
        parts = [part for part in finding.parts if part.flagged]
        said += [(f"{title}: {part.title}", part.symptom) for part in parts] or [(title, finding.symptom)]
    return tuple(said)


@dataclass(frozen=True)
class Observation:
    """What `kata new` tells the learner: ``lines`` (each a sentence or a bullet), the kata's difficulty, what
    differs visibly from the correct script's run (nothing: the output looks normal), and the figures measured."""

    lines: tuple[str, ...]
    difficulty: str
    shows: tuple[Shows, ...] = ()
    figures: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def to_json(self) -> dict:
        return {"difficulty": self.difficulty, "shows": [s.value for s in self.shows], "lines": list(self.lines),
                "figures": self.figures}


def describe(kata: Measured, correct: Measured, level: str, again: Measured | None = None) -> Observation:
    """The observation of a kata whose run is ``kata``, against the ``correct`` script's run; ``level``: the
    catalogue's difficulty, kept where the output looks normal (but never easy there). ``again``: a second run of
    the correct script, taken where a learner's own script printed other figures with the bug (it may not repeat
    itself): figures that vary as much between two clean runs are no visible difference."""
    figures = {"kata": _stable(kata), "correct": _stable(correct)}
    varying = varies(correct, again) if again is not None else []
    if again is not None:
        figures["again"] = _stable(again)
    lines, shows = visible(kata, correct, {p.key for p in varying})
    if shows:
        return Observation(tuple(lines + noise(varying, again)), LEVELS[0], tuple(shows), figures)
    lines = looks_normal(kata, correct) + noise(varying, again)
    before = {title for title, _ in correct.symptoms}  # what your own script showed before the bug was planted
    shown = [f"- {title}: {seen}" for title, seen in kata.symptoms if title not in before]
    if not common(kata, correct) and kata.losses and correct.losses and loss_differs(kata.losses[1], correct.losses[1]):
        shown.insert(0, f"- the loss its training computes (it prints none): from {_shown(kata.losses)}, where the "
                        f"correct script's goes from {_shown(correct.losses)}")
    lines += ["What a measurement shows:", *shown] if shown else ["No measurement of `kata check` flags it either."]
    return Observation(tuple(lines), LEVELS[max(1, LEVELS.index(level))], (), figures)


def varies(correct: Measured, again: Measured) -> list[Printed]:
    """The correct script's printed figures that differ visibly between two of its runs."""
    return [p for p in correct.printed if (other := again.figure(p.key)) is not None and differs(other, p)]


def noise(varying: list[Printed], again: Measured | None) -> list[str]:
    """Says which printed figures vary from run to run without the bug, with both runs' values."""
    if not varying or again is None:
        return []
    said = "; ".join(f'"{p.label}" {p.shown()}, then {again.figure(p.key).shown()}' for p in varying)
    return [f"Without the bug, two runs of the script print different figures ({said}): those are not compared."]


def typical(prose: str, level: str) -> Observation:
    """Without a run (``--no-verify``): the catalogue's prose, labelled as what such a bug typically shows."""
    return Observation((f"Typically (not measured on this script): {prose}",), level)


def visible(kata: Measured, correct: Measured, varying: set[str] = frozenset()) -> tuple[list[str], list[Shows]]:
    """What differs in the kata's own output from the correct script's, sentence by sentence; the figures named in
    ``varying`` (by key) vary as much between clean runs and are not compared."""
    lines: list[str] = []
    shows: list[Shows] = []
    if not kata.ran:
        if correct.ran:
            lines.append(f"It does not run to its end, where the correct script does: {shortened(kata.problem)}")
            shows.append(Shows.ERROR)
        return lines, shows
    for figure in kata.printed:
        reference = correct.figure(figure.key)
        if reference is not None and figure.key not in varying and differs(figure, reference):
            lines.append(f'Its printed "{figure.label}" goes {figure.shown()}, where the correct script\'s goes '
                         f"{reference.shown()}.")
            if Shows.PRINTED not in shows:
                shows.append(Shows.PRINTED)
    if kata.seconds > SLOWER * correct.seconds and kata.seconds > correct.seconds + SLOWER_BY:
        lines.append(f"It takes more than {SLOWER:g} times as long to run as the correct script.")
        shows.append(Shows.SLOWER)
    return lines, shows


def shortened(problem: str) -> str:
    """A run's problem in at most ERROR_CHARS characters, cut at a word, as a sentence."""
    problem = problem.rstrip(". ")
    if len(problem) > ERROR_CHARS:
        problem = problem[:ERROR_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:(") + " ..."
        return problem
    return problem + "."


def looks_normal(kata: Measured, correct: Measured) -> list[str]:
    """The kata's output, said to look like the correct script's, with its figures."""
    figures = common(kata, correct)
    if figures:
        said = "; ".join(f'"{p.label}" {p.shown()}' for p in figures)
        like = "look like a healthy run, close to the correct script's" if not correct.symptoms else \
            "look like the correct script's"  # which is no healthy run itself
        return [f"Its printed figures {like}: {said}."]
    if kata.losses and correct.losses:
        return [f"It prints no loss; the loss its training computes goes from {_shown(kata.losses)}, "
                f"close to the correct script's ({_shown(correct.losses)})."]
    return ["Its output looks like the correct script's."]


def common(kata: Measured, correct: Measured) -> list[Printed]:
    """The kata's printed figures that the correct script prints too."""
    return [p for p in kata.printed if correct.figure(p.key) is not None]


def differs(kata: Printed, correct: Printed) -> bool:
    """Whether a printed figure is clearly another than the correct script's: NaN or inf where it has none, a
    last value (where training ended) twice or half as large for a loss, 0.1 away for an accuracy, or an accuracy
    that an accuracy cannot be where the correct script's can. Figures that read the same as printed never differ."""
    if kata.shown() == correct.shown():
        return False
    if not kata.finite:
        return correct.finite
    if kata.kind is not Kind.ACCURACY:
        return loss_differs(kata.values[-1], correct.values[-1])
    # As fractions: printed in percent (with its sign, or without it: the correct script's values above 1).
    scale = 100 if kata.percent or correct.percent or max(abs(v) for v in correct.values) > 1.5 else 1

    def impossible(figure: Printed) -> bool:
        return any(not 0 <= v / scale <= 1 for v in figure.values)

    return abs(kata.values[-1] - correct.values[-1]) / scale > ACCURACY_GAP or \
        (impossible(kata) and not impossible(correct))


def loss_differs(kata: float, correct: float) -> bool:
    if not (math.isfinite(kata) and math.isfinite(correct)):
        return math.isfinite(kata) != math.isfinite(correct)
    low, high = sorted((abs(kata), abs(correct)))
    return high - low > LOSS_FLOOR and high > LOSS_RATIO * low


def number(value: float) -> str:
    """A loss as the observation gives it: two decimals, or two significant digits below 0.1 (0.0018)."""
    return f"{value:.2f}" if 0.1 <= abs(value) < 1e4 else f"{value:.2g}"


def _shown(ends: tuple[float, float]) -> str:
    return " to ".join(map(number, ends))


def _stable(measured: Measured) -> dict:
    """What a kata's metadata keeps of a run: all but its time, so that the same kata writes the same file."""
    doc = measured.to_json()
    del doc["seconds"]
    return doc


# -- the correct script's run, cached by content ------------------------------------------------------------------
CACHE_FORMAT = 3  # raised whenever Measured (or what it reads from a run) changes


def cache_folder() -> Path:
    """Where the correct scripts' measured runs are kept: the user's cache folder (``$XDG_CACHE_HOME``, else
    ``~/.cache``), ``torch-katas/correct-runs``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torch-katas" / "correct-runs"


def cache_key(text: str, device: str, nproc: int) -> str:
    """The script's text, how it runs, and the versions that decide what its run shows."""
    from importlib.metadata import PackageNotFoundError, version

    import katas

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = ""
    seed = json.dumps([CACHE_FORMAT, katas.__version__, torch, device, nproc, text])
    return hashlib.sha256(seed.encode()).hexdigest()


def cached(text: str, device: str, nproc: int) -> Measured | None:
    """The correct script's run as measured before, or None (never measured, or a cache that cannot be read)."""
    try:
        return Measured.from_json(json.loads((cache_folder() / f"{cache_key(text, device, nproc)}.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(text: str, device: str, nproc: int, measured: Measured) -> None:
    """Keep a correct script's run; a cache that cannot be written is only slower."""
    from katas.workspace import write_text_atomically

    try:
        write_text_atomically(cache_folder() / f"{cache_key(text, device, nproc)}.json", json.dumps(measured.to_json()))
    except OSError:
        pass
