"""divergence: training never climbs far above where it began, and a run that blows up says where it began to.

Observed. Every training loss over class labels (cross-entropy, NLL, binary cross-entropy: the losses whose chance
level ln(k) is known), as a mean per target, in the order backward passes reached them (a diagnostic loss no backward
pass reaches is not training); and the gradient norm of each update, before clipping where ``clip_grad_norm_`` ran
(after a clip the applied norm is flat by design and would hide the growth).

Rule. Two ways a run diverges:

* It turns non-finite after at least 3 finite updates, and the gradient norm grew at least 10 times over the updates
  before: the *onset* is the first update of the last stretch whose norms all stayed above 3 times the median of the
  updates before it. Non-finite from the first updates, or without growth first (a log(0), a division by zero, bad
  input data) is not a divergence: not applicable, and the ``non-finite`` probe's finding.
* Its loss over k classes climbs to at least 3 times the untrained model's (the mean of the losses before the first
  update) and ends, over the last fifth of the run, no better than chance (above 0.95 ln(k)): training made the
  model worse than a uniform guess. The untrained loss must be a classifier's, at most 2 ln(k): a loss that begins
  far above chance (inputs in raw units, a large initialisation: health's initial-loss finding) is noise no climb
  can be measured from, and not judged; nor is a loss whose targets were all one class (a contrastive positive in
  slot 0, against negatives from a queue that fills as training runs: MoCo's loss climbs while real keys replace the
  queue's random start, by design). The onset is the first step of the climb (from there on the loss stayed
  above twice the untrained one until its peak). A spike that recovers below chance passes, and says so.

Why a correct script does not fail. A learning run's loss falls from about ln(k) and ends below it; transient spikes
recover. Losses without a chance level (regression, reinforcement learning's temporal-difference losses, which grow
as the values do) are judged only when they turn non-finite. Adversarial training (optimizers taking turns on
disjoint parameters) is not judged: its losses rise by design.

Known limits. A regression loss that climbs a thousandfold and stays finite is not judged. With fewer than 10 class
losses there is too little to tell a climb from noise.
"""
from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.class_scores import OWNER, ClassScores, classes_of, per_target_divisor, slot

ID = "divergence"
TITLE = "no divergence"
SYMPTOM_ID, SYMPTOM = "loss-climb", "a loss that climbs past its start"
MIN_FINITE = 3  # finite updates before a non-finite one, for a growth to be measured
GROWTH = 10.0  # the gradient norm's growth before a non-finite value that makes it a divergence
ABOVE_MEDIAN = 3.0  # the onset: from there on, every norm stayed above this multiple of the median before it
CLIMB = 3.0  # a class loss's peak, as a multiple of the untrained model's
START_BAND = 2.0  # an untrained classifier's loss starts at most this multiple of ln(k) (health's initial-loss band)
CHANCE_MARGIN = 0.95  # ending above this share of ln(k) is no better than chance
MIN_LOSSES = 10
NORM_GREW = 2.0  # a climb's gradient norm, grown by this factor, is worth saying
USES = (OWNER,)  # the model's class decisions, for a hand-written loss's number of classes


@dataclass
class Observation:
    kind: str | None = None  # the first training class loss's function
    classes: int | None = None
    losses: list[float | None] = field(default_factory=list)  # mean per target, per reached class loss (None: NaN)
    loss_updates: list[int] = field(default_factory=list)  # per loss: the updates made before it
    grad_norms: list[float | None] = field(default_factory=list)  # per update, before clipping (None: NaN)
    fallback_classes: int | None = None  # k from the model's output and the batch's labels (a hand-written loss)
    slot: str | None = None  # the one class every target of the first class loss held ("class 0"), if so


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.pending: list = []  # (0-dim tensor, divisor, updates) per reached loss: read once, at the end
        self.clipped: float | None = None  # the total norm a clip_grad_norm_ measured since the last update
        self.scores = session.shared(ClassScores)
        session.on(Event.LOSS, ID, self.on_loss)
        session.on(Event.CLIP, ID, self.on_clip)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    def on_loss(self, call) -> None:
        import torch

        output = call.output
        if not isinstance(output, torch.Tensor) or not output.requires_grad:
            return
        k = classes_of(call)
        if k is None:
            return
        if self.obs.kind is None:
            self.obs.kind, self.obs.classes = call.kind, k
            self.obs.slot = slot(call)
        elif (call.kind, k) != (self.obs.kind, self.obs.classes):
            return
        value = output.detach().float().mean()  # stays on the device: read at the end, never a sync per step
        entry = (value, per_target_divisor(call), self.session.updates)
        pending = self.pending

        def reached(grad) -> None:
            pending.append(entry)
            return None

        output.register_hook(reached)

    def on_clip(self, params, max_norm, norm_type, total_norm) -> None:
        if norm_type == 2.0:
            self.clipped = total_norm

    def on_update(self, update) -> None:
        norm = self.clipped if self.clipped is not None else self.session.grad_norm(update.params)
        self.clipped = None
        self.obs.grad_norms.append(norm if math.isfinite(norm) else None)

    def summary(self) -> Observation:
        import torch

        top = self.scores.top_label
        if self.scores.fallback_classes in (2, top + 1):  # outputs wider than the labels are features, not scores
            self.obs.fallback_classes = self.scores.fallback_classes

        if self.pending:
            values = torch.stack([v.to("cpu") for v, _, _ in self.pending]).tolist()
            for value, (_, divisor, updates) in zip(values, self.pending):
                value /= divisor
                self.obs.losses.append(value if math.isfinite(value) else None)
                self.obs.loss_updates.append(updates)
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if facts.adversarial:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="optimizers take turns on disjoint parameters (adversarial "
                                                          "training), whose losses rise by design")
    series = {"class loss per step": obs.losses, "gradient norm per update (before clipping)": obs.grad_norms}
    bad_norm = next((i for i, v in enumerate(obs.grad_norms) if v is None), None)
    bad_loss = next((i for i, v in enumerate(facts.losses) if v is None), None)
    if bad_norm is not None or bad_loss is not None:
        return non_finite(obs, bad_norm, bad_loss, {"gradient norm per update (before clipping)": obs.grad_norms})
    if obs.classes is None and obs.fallback_classes and facts.losses:  # a hand-written loss over the classes the
        # model's output scores: the losses handed to backward, per batch
        obs.kind, obs.classes = None, obs.fallback_classes
        obs.losses = [None if v is None else v * facts.accumulation for v in facts.losses]
        obs.loss_updates = [0 if i < facts.accumulation else 1 for i in range(len(obs.losses))]  # before the first
        # update: the backward passes it accumulated
        series["class loss per step"] = obs.losses
    return climb(obs, series)


def non_finite(obs: Observation, bad_norm: int | None, bad_loss: int | None, series: dict) -> Finding:
    """A run that turned non-finite: a divergence when the gradient norm grew first."""
    first = len(obs.grad_norms) if bad_norm is None else bad_norm  # updates made with finite gradients
    if bad_loss is not None:
        first = min(first, bad_loss)  # a non-finite loss's own update is already non-finite (without accumulation)
    before = [v for v in obs.grad_norms[:first] if v is not None]
    where = f"update {first + 1}"
    if len(before) < MIN_FINITE:
        return Finding(ID, TITLE, NOT_APPLICABLE, f"non-finite at {where}", f"≥ {MIN_FINITE} finite updates first",
                       f"the run was non-finite from its first updates ({where}): nothing grew before it "
                       "(see non-finite)", series)
    onset = growth_onset(before)
    base = statistics.median(before[:onset]) if onset else before[0]
    growth = max(before[onset:]) / max(base, 1e-30)
    measured, threshold = f"{growth:.3g}× growth", f"< {GROWTH:g}×"
    if growth < GROWTH:
        return Finding(ID, TITLE, NOT_APPLICABLE, measured, threshold,
                       f"the run turned non-finite at {where} without the gradient norm growing first (at most "
                       f"{growth:.3g}× over the updates before): a log(0), a division by zero or bad input, not "
                       "updates that grew (see non-finite)", series)
    peak = max(range(onset, len(before)), key=before.__getitem__)
    since = f"{base:.3g} (the median before update {onset + 1})" if onset else f"{base:.3g} at update 1"
    seen = (f"the gradient norm grew from {since} to {before[peak]:.3g} at update {peak + 1}, and the run turned "
            f"non-finite at {where}")
    return Finding(ID, TITLE, FAIL, measured, threshold,
                   f"{seen}: the divergence started at update {onset + 1}, not where the first NaN showed (updates "
                   "too large for this model: a learning rate too high, gradients larger than meant, or an "
                   "overflow)", series, observed=seen)


def growth_onset(norms: list[float]) -> int:
    """The first index of the last stretch whose every value stayed above ABOVE_MEDIAN times the median of the values
    before it (0 when no such stretch: the run grew from its start)."""
    suffix_min = list(norms)
    for i in range(len(norms) - 2, -1, -1):
        suffix_min[i] = min(norms[i], suffix_min[i + 1])
    before: list[float] = []
    for i in range(1, len(norms)):
        bisect.insort(before, norms[i - 1])
        if suffix_min[i] > ABOVE_MEDIAN * statistics.median(before):
            return i
    return 0


def climb(obs: Observation, series: dict) -> Finding:
    """A loss over classes that climbed far above the untrained model's and ended no better than chance."""
    if not obs.classes:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no training loss scores class labels: without a chance "
                                                          "level, only a non-finite run is judged")
    pairs = [(v, u) for v, u in zip(obs.losses, obs.loss_updates or [0] + [1] * len(obs.losses)) if v is not None]
    values = [v for v, _ in pairs]
    if len(values) < MIN_LOSSES:
        return Finding(ID, TITLE, NOT_APPLICABLE, f"{len(values)} losses", f"≥ {MIN_LOSSES}",
                       f"only {len(values)} training losses over classes: too few to tell a climb from noise", series)
    k, chance = obs.classes, math.log(obs.classes)
    if obs.slot is not None and obs.slot.startswith("class "):
        return Finding(ID, TITLE, NOT_APPLICABLE, message=(
            f"every target of the first class loss was {obs.slot}: a contrastive positive in a fixed slot, whose "
            "negatives may change as training runs (a queue of keys that fills), so the untrained loss is no chance "
            "baseline to climb from; only a non-finite run is judged"), series=series)
    untrained = [v for v, updates in pairs if updates == 0] or values[:1]
    first = sum(untrained) / len(untrained)
    began = f"{first:.3g} (before the first update)"
    if first > START_BAND * chance:
        return Finding(ID, TITLE, NOT_APPLICABLE, f"start {first:.3g}", f"≤ {START_BAND:g} ln({k})",
                       f"the loss began at {began}, far above chance (ln({k}) = {chance:.3g}): not an untrained "
                       "classifier's start (see health's initial loss), so a climb cannot be told from where it began",
                       series)
    peak = max(range(len(values)), key=values.__getitem__)
    tail = values[-max(2, len(values) // 5):]
    end = sum(tail) / len(tail)
    ratio = values[peak] / max(first, 1e-12)
    measured, threshold = f"peak {ratio:.3g}× start", f"< {CLIMB:g}× or ends below ln({k})"
    if ratio < CLIMB:
        return Finding(ID, TITLE, PASS, measured, threshold,
                       f"the loss never rose above {CLIMB:g} times where it began, {began} (peak {values[peak]:.3g} at "
                       f"step {peak + 1})", series)
    if end < CHANCE_MARGIN * chance:
        return Finding(ID, TITLE, PASS, measured, threshold,
                       f"the loss spiked to {values[peak]:.3g} at step {peak + 1} ({ratio:.3g}× where it began, "
                       f"{began}) and recovered: it ends at {end:.3g}, below chance (ln({k}) = {chance:.3g})", series)
    onset = peak
    while onset > 0 and values[onset - 1] > 2 * first:
        onset -= 1
    grew = norm_growth(obs, onset, peak)
    seen = (f"the loss climbed from {began} to {values[peak]:.3g} (step {peak + 1}), rising from step {onset + 1} on, "
            f"and ends at {end:.3g}, no better than chance (ln({k}) = {chance:.3g}){grew}")
    return Finding(ID, TITLE, FAIL, measured, threshold,
                   f"{seen}: training diverged from step {onset + 1} (updates too large for this model: a "
                   "learning rate too high, or gradients larger than meant) and left the model worse than a uniform "
                   "guess", series, observed=seen)


def norm_growth(obs: Observation, onset: int, peak: int) -> str:
    """How the gradient norm grew over the climb, where updates were seen and it grew."""
    if not obs.loss_updates or not obs.grad_norms:
        return ""
    first = obs.loss_updates[min(onset, len(obs.loss_updates) - 1)]
    last = obs.loss_updates[min(peak, len(obs.loss_updates) - 1)]
    norms = obs.grad_norms
    if first >= last or last >= len(norms) or norms[first] is None or norms[last] is None:
        return ""
    if norms[last] < NORM_GREW * norms[first]:
        return ""  # the climb came from steps of the same size (Adam's normalised ones): nothing to add
    return f"; the gradient norm went from {norms[first]:.3g} to {norms[last]:.3g} over the same steps"
