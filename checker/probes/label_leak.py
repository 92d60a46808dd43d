"""label-leak: no input feature hands the model its label.

Observed. For each stream of forwards (a model with autograd on, training; the same model with autograd off,
evaluating) whose batch has class labels (a loader's one-dimensional integer tensor, one per sample), the input of
the model's first layer (the first module of the forward with parameters of its own: the tensor a layer that drops
a column would no longer see), flattened to one row of features per sample when it is floating-point and has at
most 4096 of them. A feature is *one-to-one with the label* when every sample of a class has the same finite value
in it and different classes have different values, on every sample read so far. A stream is read until no feature
is left that could be one (after its first batch, for almost every script: the rest of the run pays nothing), or
for 64 batches or 2048 samples at most.

Rule. The probe fails when, in a stream whose forwards were scored against the batch's labels (a loss that took
them as its target, or an accuracy computed from the model's output and them), some feature stayed one-to-one with
the label over at least 64 samples of classes each seen at least 4 times, at least 2 such classes: the label
itself, or a copy of it in other units, is part of the input (a column written from the label, a target kept
among the features, an ID that encodes the class). A rare class seen once or twice is no evidence: its lone sample
has one value in every feature (a fraud among 500 legitimate rows, with a flag the others lack). With too little
evidence it cannot tell. The model can read the answer: training learns the shortcut and the accuracy measured on
those inputs says nothing about the task. A validation stream that leaks is the usual sight: training inputs are
often jittered, which hides the copy there, while validation inputs are not.

Why a correct script does not fail. A real feature, continuous or categorical, varies within a class or is shared by
several classes: padding, a constant column, a start token and a border pixel take the same value in every class.
Inputs wider than 4096 features (images) are not read, and neither are inputs the first layer gets as anything but a
plain floating-point tensor: token ids into an embedding are positions of a sequence, not features (a text whose
first token is its class, a toy's design or a leak, is not judged). A model trained on something other than the
batch's class labels (a conditional generator fed its labels on purpose, scored against real/fake targets, not
against them) is not judged.

Known limits. Labels are read from the batches a DataLoader yields: a loop that slices tensors by hand, or trains
full-batch, is not judged. A label hidden in a combination of features (two columns whose sum is the class), noised,
or in the pixels of an image is not seen; a toy task whose label is by construction a copy of one input ("predict
the first bit") fails, truthfully: its model needs to learn nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.class_scores import OWNER, ClassScores
from checker.probes._shared.layers import first_layer

ID = "label-leak"
TITLE = "inputs do not contain the label"
SYMPTOM_ID, SYMPTOM = "one-feature-classes", "a single input feature that tells every class"
BATCHES, SAMPLES = 64, 2048  # a stream is read until no feature is left that could be a copy, or this much was read
MAX_FEATURES = 4096  # wider inputs (images) are not read
MIN_SAMPLES = 64  # of the classes seen often enough
PER_CLASS = 4  # a class seen fewer times is no evidence (a rare class's lone sample has one value in every feature)
USES = (OWNER,)  # which forwards were scored against the batch's labels


@dataclass
class Observation:
    # per stream: {"model" (its class name), "training" (autograd on), "samples", "classes", "often" (classes seen at
    # least PER_CLASS times), "often_samples" (their samples), "features", "leaks" (the feature indices still
    # one-to-one with the label), "values" ({label: value} of the first of them, at most 8 labels), "scored" (some
    # forward of the stream was scored against the batch's labels), "read" (batches)}
    streams: list[dict] = field(default_factory=list)
    unread: str = ""  # why no input was read, where none was


class Stream:
    """What one model's forwards, training or evaluating, showed so far."""

    def __init__(self, name: str, training: bool):
        self.name, self.training = name, training
        self.samples, self.read, self.features = 0, 0, 0
        self.labels: list[int] = []  # the labels seen, in the order of ``values``' rows
        self.counts: dict[int, int] = {}  # samples read per label
        self.candidates = None  # the feature indices still one-to-one with the label (a tensor), None before any
        self.values = None  # (labels seen, candidates): each label's value in each candidate
        self.forwards: list[int] = []
        self.against: set[int] = set()  # forwards whose loss took the batch's labels as its target
        self.done = False

    def read_batch(self, x, labels) -> None:
        import torch

        rows = x.detach().reshape(x.shape[0], -1).to("cpu", torch.float64)
        labels = labels.detach().to("cpu").long()
        labelled = labels >= 0  # an ignored target (-100) is no class
        rows, labels = rows[labelled], labels[labelled]
        if self.candidates is None:
            self.features = rows.shape[1]
            self.candidates = torch.arange(rows.shape[1])
            self.values = torch.empty(0, rows.shape[1], dtype=torch.float64)
        elif rows.shape[1] != self.features:
            self.done = True
            return
        rows = rows[:, self.candidates]
        present, inverse, counts = labels.unique(return_inverse=True, return_counts=True)
        index = inverse[:, None].expand(-1, rows.shape[1])
        low = torch.full((len(present), rows.shape[1]), float("inf"), dtype=torch.float64)
        high = torch.full_like(low, float("-inf"))
        low = low.scatter_reduce(0, index, rows, "amin")
        high = high.scatter_reduce(0, index, rows, "amax")
        keep = (low == high).all(0) & low.isfinite().all(0)  # one finite value per class in this batch
        values = self.values
        for row, label in enumerate(present.tolist()):
            if label in self.labels:
                keep &= values[self.labels.index(label)] == low[row]
            else:
                self.labels.append(label)
                values = torch.cat([values, low[row:row + 1]])
        if len(self.labels) > 1:
            ordered = values.sort(0).values
            keep &= (ordered[1:] != ordered[:-1]).all(0)  # different classes, different values
        self.candidates, self.values = self.candidates[keep], values[:, keep]
        for label, count in zip(present.tolist(), counts.tolist()):
            self.counts[label] = self.counts.get(label, 0) + count
        self.samples += len(labels)
        self.read += 1
        self.done = not len(self.candidates) or self.read >= BATCHES or self.samples >= SAMPLES

    def summary(self, scored: set[int]) -> dict:
        leaks = [] if self.candidates is None else self.candidates.tolist()
        values = {}
        if leaks:
            pairs = sorted(zip(self.labels, self.values[:, 0].tolist()))[:8]
            values = {str(label): value for label, value in pairs}
        often = [n for n in self.counts.values() if n >= PER_CLASS]
        return {"model": self.name, "training": self.training, "samples": self.samples, "classes": len(self.labels),
                "often": len(often), "often_samples": sum(often), "features": self.features, "leaks": leaks[:16],
                "values": values, "read": self.read,
                "scored": any(i in scored or i in self.against for i in self.forwards)}


class Observer:
    def __init__(self, session):
        self.session = session
        self.scores = session.shared(ClassScores)
        self.streams: dict[tuple[int, bool], Stream] = {}
        self.unread = ""
        self._stream: Stream | None = None  # the stream of the top-level forward whose first layer is awaited
        self._reading: dict[int, Stream] = {}  # forward index -> the stream it was read for
        self._handle = session.patches.forward_pre_hook(ID, self._before)
        session.on(Event.LOSS, ID, self.on_loss)

    def on_loss(self, call) -> None:
        """A loss over the batch's own labels scores the forward against them (a discriminator's real/fake targets
        do not)."""
        import torch

        stream, labels, target = self._reading.get(call.forward), self.session.labels, call.target
        if stream is None or labels is None or not isinstance(target, torch.Tensor) \
                or target.numel() != labels.numel():
            return
        same = target.detach().reshape(-1).to(labels.device).long()  # as floats, or as a column (B, 1), too
        if target is labels or torch.equal(same, labels.reshape(-1).long()):
            stream.against.add(call.forward)

    def _before(self, module, args) -> None:
        top = self.session.forward is None  # a top-level call: a forward starts (or a loss module is called)
        if not top and self._stream is None:  # the common case, kept cheap: a module inside a forward not read
            return
        import torch
        from torch import nn

        from checker import tensors

        if not tensors.observable():
            return
        if top:
            self._stream = None
            labels = self.session.labels
            if isinstance(module, nn.modules.loss._Loss) or labels is None or labels.dim() != 1 or not len(labels):
                return
            key = (id(module), torch.is_grad_enabled())
            stream = self.streams.get(key)
            if stream is None:
                stream = self.streams[key] = Stream(type(module).__name__, torch.is_grad_enabled())
            if stream.done:
                return
            stream.forwards.append(len(self.session.forwards))
            self._reading[len(self.session.forwards)] = stream
            self._stream = stream
        layer = first_layer(module._orig_mod) if type(module).__name__ == "OptimizedModule" else module
        if layer is None or not any(p is not None for p in layer._parameters.values()):
            return
        stream, self._stream = self._stream, None
        x, labels = args[0] if args else None, self.session.labels
        if isinstance(x, torch.Tensor) and not x.is_floating_point() and not x.is_complex():
            self.unread = self.unread or ("the first layer's inputs are integers (token ids): the positions of a "
                                          "sequence are not features")
            stream.done = True
            return
        if not isinstance(x, torch.Tensor) or not tensors.plain(x) or x.is_complex() or x.dim() < 2 \
                or x.shape[0] != labels.shape[0]:
            self.unread = self.unread or "the first layer's input is not a plain tensor of one row per labelled sample"
            return
        if x[0].numel() > MAX_FEATURES:
            self.unread = self.unread or f"inputs of {x[0].numel()} features (more than {MAX_FEATURES}) are not read"
            stream.done = True
            return
        stream.read_batch(x, labels)

    def summary(self) -> Observation:
        self.session.patches.remove(self._handle)
        scored = {i for i, row in self.scores.scored.items() if row["source"] == "output"}  # against the batch's labels
        streams = [s.summary(scored) for s in self.streams.values() if s.read]
        return Observation(streams, "" if streams else self.unread)


def enough(stream: dict) -> bool:
    """At least 2 classes seen PER_CLASS times or more, with MIN_SAMPLES samples between them."""
    return stream["often"] >= 2 and stream["often_samples"] >= MIN_SAMPLES


def judge(obs: Observation, facts: RunFacts) -> Finding:
    judged = [s for s in obs.streams if s["scored"]]
    if not judged:
        why = obs.unread or "no forward was scored against a batch's class labels"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    leaking = [s for s in judged if s["leaks"] and enough(s)]
    if leaking:
        s = min(leaking, key=lambda s: s["training"])  # a validation stream first: the usual sight
        which = "training" if s["training"] else "evaluation"
        mapping = ", ".join(f"class {label} → {value:.4g}" for label, value in s["values"].items())
        more = f" (and {len(s['leaks']) - 1} more)" if len(s["leaks"]) > 1 else ""
        seen = (f"one of the {s['features']} features {s['model']}'s first layer received tells the class of every "
                f"one of {s['samples']} {which} samples of {s['classes']} classes on its own")
        said = (f"feature {s['leaks'][0]}{more} of the {s['features']} that {s['model']}'s first layer received took "
                f"one value per class on every one of {s['samples']} {which} samples of {s['classes']} classes "
                f"({mapping})")
        leaks = len(s["leaks"])
        return Finding(ID, TITLE, FAIL, f"{leaks} feature{'s' if leaks > 1 else ''}", "0",
                       f"{said}: the label itself is part of the input, so the model can read the answer and the "
                       "accuracy measured on these inputs says nothing about the task", observed=seen)
    unsure = [s for s in judged if s["leaks"]]
    if unsure:
        s = unsure[0]
        why = (f"of the {s['samples']} labelled samples read, {s['often_samples']} are of classes seen at least "
               f"{PER_CLASS} times ({s['often']} of {s['classes']} classes): too few to tell whether a feature that "
               f"takes one value per class does so by chance (≥ {MIN_SAMPLES} samples of at least 2 such classes; a "
               "rare class's lone sample has one value in every feature)")
        return Finding(ID, TITLE, CANNOT_TELL, f"{s['often_samples']} samples", f"≥ {MIN_SAMPLES}",
                       f"feature {s['leaks'][0]} took one value per class, but {why}", observed=why)
    read = sum(s["samples"] for s in judged)
    return Finding(ID, TITLE, PASS, "0 features", "0",
                   f"no input feature took one value per class ({read} labelled samples read)")
