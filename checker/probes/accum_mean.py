"""accum-mean: an update after gradient accumulation applies the mean of its micro-batches' gradients.

Rule: an update whose gradients came from K >= 2 backward passes, each from its own
forward of one model (one top-level module ran with gradients, on inputs no
other model produced), is sampled. For each backward
the gradient contributions to every parameter are summed (``S``) and the
gradient that reached the main loss's output is read (``m``: the largest
gradient reaching the output of a ``mean``-reduced loss function; it is
``scale / K`` when the loss was divided by K before a GradScaler's
``scale(...)``, ``scale`` when it was not). A micro-batch's own gradient is its
contribution divided by its ``m``, so the mean of the micro-batch gradients is
``S / sum(m)`` in the units the optimizer sees (a GradScaler's scale cancels),
times the factor every ``clip_grad_norm_`` since the backward applied
(``min(1, max_norm / (norm + 1e-6))`` from the norm it measured). At the step the
applied ``.grad`` must equal it within 1e-4 relative. Measured: relative error
9e-8 on the ``text`` reference (K = 2, GradScaler, clipping) against 1.0 with the
loss not divided (the applied gradient is K times the mean); 0 against 3.0 for
K = 4 (SGD fixtures); 0 against 1.0 on the nanoGPT-style corpus script.

In data-parallel training (DDP) the applied ``.grad`` is the mean over ranks of each
rank's accumulated gradient, so a rank alone cannot judge it: each rank records,
per sampled update, the applied and its own expected gradient projected on 8
random directions (the same on every rank; the first 65,536 gradient elements),
and the ranks are judged together: where the applied projections agree across
ranks (gradients synchronised), the expected mean is the mean over ranks of their
expected projections; where they differ (no synchronisation), each rank's own
comparison stands.

Only the K-times mismatch fails. ``p.grad /= K`` before the step passes (the mean
is what is applied); dividing the learning rate instead fails (the gradient is
still K times the mean; Adam ignores the scale). Cannot tell when the
normalisation cannot be read: a loss reduced by ``sum`` or ``none`` (token-count
normalisation across micro-batches, ``sum / n_tokens``), a loss computed by
hand, gradients reset or edited between the backward passes and the step, or
another mismatch. Not applicable without accumulation (one backward per
update, as in most scripts, costs nothing: sampling starts only after an update
with two backwards or more, and stops after a few updates). Backwards of two
modules between updates or of a model fed another's outputs (a GAN's
discriminator on real and generated batches), and two backwards from one forward
(loss parts backwarded separately) are not accumulation and are not judged.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from checker.distributed import launched
from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "accum-mean"
TITLE = "accumulated gradient is the micro-batch mean"
SYMPTOM_ID, SYMPTOM = "update-size", "size of each update against its micro-batches"
RTOL = 1e-4
SAMPLED = 6  # accumulated updates compared
PROJECTIONS, HEAD, SEED = 8, 65536, 20240917  # directions and gradient elements projected in a distributed run


@dataclass
class Observation:
    accumulated: int = 0  # updates after K >= 2 backward passes, sampled
    micro_batches: list[int] = field(default_factory=list)  # K per sampled update
    ratios: list[float] = field(default_factory=list)  # |applied| / |expected mean|, per judged update
    errors: list[float] = field(default_factory=list)  # |applied - expected| / |expected|
    undetermined: list[str] = field(default_factory=list)  # why an update could not be judged
    projections: list[list[float]] = field(default_factory=list)  # in a distributed run, per judged update: the
    # applied gradient's projections on PROJECTIONS random directions, then the expected mean's


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.recording = False  # an update with two backwards or more was seen: compare the next ones
        self.done = False
        self.backwards = 0  # since the last update
        self.sums: dict[int, list] = {}  # parameter id -> [weak ref, summed contribution]
        self.clip: dict[int, float] = {}  # parameter id -> clip factor applied since the last backward
        self.mains: list[float | None] = []  # per backward: the gradient reaching its main loss (None: unknown)
        self.why: str | None = None  # this window cannot be judged
        self.keys: set = set()
        self.modules: set[int] = set()
        self.forwards: list[int] = []  # forwards with gradients in the window
        self.skips = 0
        session.on(Event.BACKWARD, ID, self.on_backward)
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.LOSS, ID, self.on_loss)
        session.on(Event.CLIP, ID, self.on_clip)
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    # -- the window between two updates ------------------------------------------
    def reset(self) -> None:
        self.backwards, self.sums, self.clip, self.mains = 0, {}, {}, []
        self.why, self.keys, self.modules, self.forwards = None, set(), set(), []

    def on_forward(self, forward) -> None:
        if forward.grad:
            self.modules.add(forward.module)
            self.forwards.append(forward.index)

    def on_backward(self, loss) -> None:
        if self.session.scaler_skips != self.skips:  # a skipped update ended the window
            self.skips = self.session.scaler_skips
            self.reset()
        self.backwards += 1
        last = self.session.last_forward
        key = last.index if last is not None else None
        if key in self.keys:
            self.why = self.why or "two backward passes from one forward (loss parts backwarded separately)"
        self.keys.add(key)
        self.clip = {}
        if self.recording:
            self.mains.append(None)

    def on_loss(self, call) -> None:
        if not self.recording or self.done:
            return
        out = call.output
        import torch

        if not isinstance(out, torch.Tensor) or not out.requires_grad or not torch.is_grad_enabled():
            return
        reduction = call.reduction

        def reached(grad) -> None:
            if not self.mains:
                return
            if reduction != "mean" or grad.numel() != 1:
                self.why = self.why or f"a loss reduced by '{reduction}': the normalisation is the script's own"
                return
            value = abs(float(grad.detach().float()))
            self.mains[-1] = max(self.mains[-1] or 0.0, value)

        out.register_hook(reached)

    def on_grad(self, p, grad) -> None:
        if not self.recording or self.done:
            return
        from checker.tensors import any_nonzero, plain

        if not plain(grad):
            self.why = self.why or f"gradients of a kind not compared ({grad.layout}, sparse or nested)"
            return
        entry = self.sums.get(id(p))
        if entry is None:
            if p.grad is not None and any_nonzero(p.grad):
                self.why = self.why or "gradients left from before the window"
            self.sums[id(p)] = [weakref.ref(p), grad.detach().float().clone()]
            return
        if p.grad is None or not any_nonzero(p.grad):
            self.why = self.why or "gradients reset between the micro-batches"
        entry[1].add_(grad.detach().float())

    def on_clip(self, params, max_norm, norm_type, total_norm) -> None:
        if not self.recording or self.done:
            return
        if norm_type == float("inf") and self.why is None and total_norm > max_norm:  # clip_grad_value_ engaged
            self.why = "gradients clipped by value, element by element: the applied mean is not a scaled copy"
        factor = min(1.0, max_norm / (total_norm + 1e-6))
        for p in params:
            self.clip[id(p)] = self.clip.get(id(p), 1.0) * factor

    def on_update(self, update) -> None:
        try:
            if update.manual or self.done:
                return
            if not self.recording:
                if self.backwards >= 2 and len(self.modules) == 1 and self.why is None and not self.fed():
                    self.recording = True
                return
            if self.backwards < 2:
                return
            if len(self.modules) > 1:
                self.why = self.why or "forwards of more than one model between updates"
            if self.fed():
                self.why = self.why or "a model fed another model's outputs (a GAN's generated batch)"
            self.compare(update)
            if self.obs.accumulated >= SAMPLED:
                self.done = True
                self.sums = {}
        finally:
            self.reset()

    def fed(self) -> bool:
        """Whether a forward of the window ran on another forward's outputs."""
        window = set(self.forwards)
        return any(window.intersection(f.fed) for f in self.session.forwards[-64:] if f.fed)

    def compare(self, update) -> None:
        import torch

        obs = self.obs
        obs.accumulated += 1
        obs.micro_batches.append(self.backwards)
        why = self.why
        if why is None and (len(self.mains) != self.backwards or any(m is None or m == 0 for m in self.mains)):
            why = "a backward pass reached no loss function (a loss computed by hand)"
        if why is None:
            total = sum(self.mains)
            applied, expected = [], []
            for p in update.params:
                entry = self.sums.get(id(p))
                if entry is None or p.grad is None:
                    continue
                applied.append(p.grad.detach().float().flatten())
                expected.append(entry[1].flatten().to(p.grad.device) * (self.clip.get(id(p), 1.0) / total))
            if not applied:
                why = "no parameter of the update received gradient"
            else:
                a, e = torch.cat(applied), torch.cat(expected)
                norm = float(e.norm())
                if norm == 0 or not torch.isfinite(a).all():
                    why = "the expected gradient is zero or not finite"
                else:
                    obs.ratios.append(float(a.norm()) / norm)
                    obs.errors.append(float((a - e).norm()) / norm)
                    if launched():
                        obs.projections.append(project(a) + project(e))
                    return
        obs.undetermined.append(why)

    def summary(self) -> Observation:
        return self.obs


def project(vector) -> list[float]:
    """``vector``'s first HEAD elements projected on PROJECTIONS random directions, the same in every process."""
    import torch

    head = vector[:HEAD].double().cpu()
    directions = torch.randn(PROJECTIONS, len(head), generator=torch.Generator().manual_seed(SEED), dtype=torch.float64)
    return (directions @ head).tolist()


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    """The ranks together: where the applied gradient is the same on every rank (synchronised), the expected mean
    is the mean over ranks of their own expected means; elsewhere each rank's own comparison stands."""
    import math

    first = observations[0]
    aligned = all(len(o.projections) == len(o.ratios) == len(first.ratios) for o in observations)
    if not aligned or not first.projections:
        worst = max(observations, key=lambda o: (bool(o.accumulated), max(o.errors, default=0.0)))
        return judge(worst, facts[0])
    merged = Observation(first.accumulated, first.micro_batches, [], [], list(first.undetermined))
    for j in range(len(first.ratios)):
        rows = [o.projections[j] for o in observations]
        applied = rows[0][:PROJECTIONS]
        if all(max(abs(x - y) for x, y in zip(row[:PROJECTIONS], applied)) <= 1e-6 * (1 + max(map(abs, applied)))
               for row in rows):
            expected = [sum(row[PROJECTIONS + i] for row in rows) / len(rows) for i in range(PROJECTIONS)]
            norm = math.sqrt(sum(x * x for x in expected))
            if norm == 0:
                merged.undetermined.append("the expected gradient is zero")
                continue
            merged.ratios.append(math.sqrt(sum(x * x for x in applied)) / norm)
            merged.errors.append(math.sqrt(sum((x - y) ** 2 for x, y in zip(applied, expected))) / norm)
        else:  # not synchronised: each rank applied its own gradient, judged as in one process
            k = max(range(len(observations)), key=lambda r: observations[r].errors[j])
            merged.ratios.append(observations[k].ratios[j])
            merged.errors.append(observations[k].errors[j])
    return judge(merged, facts[0])


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.accumulated:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no update accumulated gradients of several micro-batches",
                       observed="no update followed more than one backward pass")
    k = max(obs.micro_batches)
    series = {"applied / expected mean, per sampled update": obs.ratios}
    if not obs.ratios:
        return Finding(ID, TITLE, CANNOT_TELL, message=f"the mean of the micro-batch gradients cannot be read: "
                                                       f"{obs.undetermined[0]}")
    matched = sum(1 for e in obs.errors if e <= RTOL)
    times = [(r, kk) for r, e, kk in zip(obs.ratios, obs.errors, obs.micro_batches) if e > RTOL]
    k_times = [r for r, kk in times if abs(r - kk) <= RTOL * kk or (kk > 1 and abs(r - kk) / kk <= 1e-3)]
    worst = max(obs.errors)
    measured, threshold = f"relative error up to {worst:.3g} over {len(obs.ratios)} updates", f"{RTOL:g}"
    if k_times:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"the gradient applied after accumulating {k} micro-batches was {k_times[0]:.3g} times the mean "
                       f"of their gradients ({len(k_times)} of {len(obs.ratios)} sampled updates): the micro-batch "
                       "losses were summed, not averaged", series,
                       observed=f"the gradient applied after {k} backward passes was {k_times[0]:.3g} times the "
                                "average of their gradients")
    if matched == len(obs.ratios) and not obs.undetermined:
        return Finding(ID, TITLE, PASS, measured, threshold,
                       f"every sampled update applied the mean gradient of its {k} micro-batches", series,
                       observed="each update applied the mean of the gradients of the backward passes before it")
    why = obs.undetermined[0] if obs.undetermined else f"the applied gradient was {times[0][0]:.3g} times the mean"
    return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                   f"the applied gradient matches neither the mean nor the sum of the micro-batch gradients: {why}",
                   series)
