"""health: the script still trains. A "fix" that deletes the training fails here.

Criteria (each its own row; a criterion whose premise the run does not meet says n/a and why):

* training ran: at least one update (an optimizer step or a manual update);
* initial loss near ln(k): the first loss that a backward pass reached (a
  diagnostic ``print(loss_fn(model(x), y))`` is not training), of a cross-entropy,
  NLL or binary cross-entropy over class labels (averaged over the first losses
  until 32 samples, at most 4, before any update: a batch of 4 alone is too noisy,
  and a loss after an update is no longer the untrained model's) (k classes; two for binary targets in {0, 1}),
  as a mean per target, is between half and twice ln(k) (outside it, not judged when every target of those
  losses was one class, or each row's own position, ``arange(B)``: the slot a contrastive loss's positive fills by
  construction). For a hand-written loss,
  the first backward's loss (times the accumulation factor) when the batch has
  integer labels the model's output scores (k outputs, or one logit and 0/1 labels);
* training loss falls: the mean of the last fifth of the backward passes' losses
  is at least 10 % of its size below the mean of the first fifth (any fall, where
  the validation accuracy below passes: a short or slow run that learned; only for
  the updater of the first training loss, whose model is the one validated), for each
  updater's stage, or 5 % where the fall is steady (the last fifth's mean below
  every one of at least 5 losses of the first fifth: a layer-local objective with a
  floor, trained full-batch, falls slowly but surely) and, for a loss over k class
  labels, ends at least 5 % below ln(k) (a model that learned only the labels'
  mean falls steadily onto chance); not judged when no loss went through ``backward()`` (gradients from
  ``torch.autograd.grad`` or ``torch.func.grad``, assigned to ``.grad``), nor when two optimizers take turns on disjoint
  parameters, each after its own backward pass, on models one backward pass couples or one feeds the other (adversarial
  training: a GAN, its idle player frozen or not; not an encoder and a decoder whose optimizers both apply one backward
  pass), nor for a policy gradient (the run samples from ``torch.distributions`` and
  takes the log-probability of sampled values with gradients: PPO, actor-critic; its loss weighs them by returns
  that move as the policy learns), for a stage that began at the level where an
  earlier stage's loss had settled (it continues a trained model), per forward where each loss
  sums a varying number of forwards (see ``objective_falls``), or where a copy of the trained network
  runs at every update (a target network, a teacher averaged from the student: the targets the loss
  regresses on move as the network learns, and a Q-learner's loss may grow with its values);
* every training batch leads to an update (k-step accumulation allowed);
* parameters are finite at the end;
* validation accuracy: in the last block of evaluation forwards, the class
  scores' argmax (or the binary decision) against the labels, from the loss
  function's own inputs when it scores one label per sample, else from the
  model's outputs and the batch's labels under the premise above; at least a
  quarter of the way from chance (the majority class) to perfect (not judged when every label was one class);
* the checker's instrumentation is intact at the end: a script that removes its
  hooks or replaces what it wrapped is not trusted to have passed anything.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from checker.events import Event
from checker.facts import RunFacts, finite
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.class_scores import OWNER, ClassScores, classes_of, mean_per_target, slot
from checker.probes._shared.copies import OWNER as COPIES
from checker.probes._shared.copies import Copies, per_update

ID = "health"
TITLE = "training health"
SYMPTOM_ID, SYMPTOM = "health", "training health"
LOSS_BAND = (0.5, 2.0)
FALL = 0.1
STEADY_FALL, STEADY_LOSSES = 0.05, 5  # a fall below every one of the first fifth's (at least 5) losses needs less
ABOVE_CHANCE = 0.25
CANDIDATES = 16  # losses with gradients kept while none has been backpropagated yet
INITIAL_SAMPLES, INITIAL_LOSSES = 32, 4  # the initial loss is the mean of the first losses over this many samples
USES = (OWNER, COPIES)  # the per-forward class decisions, shared with reported-metric; copies of the trained network


@dataclass
class Observation:
    first_loss: str | None = None  # the loss function of the first training loss, if one was called
    initial: float | None = None  # its value, as a mean per target
    classes: int | None = None  # k, where the premise of class labels holds
    fallback_classes: int | None = None  # k from the model's output and the batch's labels
    accuracy: dict | None = None  # {"correct", "total", "majority", "source"}
    moving_targets: str | None = None  # a copy of the trained network that runs at every update, if one did
    slot: str | None = None  # the fixed slot every target of the initial losses held, if so ("class 0", ...)


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.candidates: list[tuple] = []  # (kind, classes, mean per target) of the first losses with gradients
        self.reached: set[int] = set()  # ... that a backward pass reached
        self.scores = session.shared(ClassScores)
        self.copies = session.shared(Copies)
        session.on(Event.LOSS, ID, self.on_loss)

    def on_loss(self, call) -> None:
        if len(self.reached) < INITIAL_LOSSES and getattr(call.input, "requires_grad", False) \
                and len(self.candidates) < CANDIDATES:
            self._candidate(call)

    def _candidate(self, call) -> None:
        """A loss with gradients, kept until one that a backward pass reaches tells which is the first training loss
        (a diagnostic ``print(loss_fn(model(x), y))`` of a trained model is never backpropagated)."""
        import torch

        k = classes_of(call)
        samples = int(call.input.shape[0]) if getattr(call.input, "dim", lambda: 0)() else 1
        entry = (call.kind, k, mean_per_target(call) if k else None, samples, self.session.updates, slot(call))
        output = call.output
        if not isinstance(output, torch.Tensor) or not output.requires_grad:
            return
        index = len(self.candidates)
        self.candidates.append(entry)

        def reached(grad) -> None:
            self.reached.add(index)

        output.register_hook(reached)

    def summary(self) -> Observation:
        if self.reached:  # the first loss a backward pass reached, of those called before it
            first = [self.candidates[i] for i in sorted(self.reached)]
            kind, classes = first[0][:2]
            self.obs.first_loss = kind
            if classes:  # over at least INITIAL_SAMPLES samples: one batch of 4 is too noisy to judge
                same, seen = [], 0
                for entry in first[:INITIAL_LOSSES]:  # the untrained model's: no update between them
                    if entry[:2] != (kind, classes) or entry[4] != first[0][4] or (same and seen >= INITIAL_SAMPLES):
                        break
                    same.append(entry)
                    seen += entry[3]
                self.obs.classes = classes
                self.obs.initial = sum(e[2] * e[3] for e in same) / max(1, sum(e[3] for e in same))
                slots = {e[5] for e in same}
                self.obs.slot = slots.pop() if len(slots) == 1 else None
        self.obs.fallback_classes = self.scores.fallback_classes
        if self.obs.fallback_classes and self.obs.fallback_classes not in (2, self.scores.top_label + 1):
            self.obs.fallback_classes = None  # outputs wider than the labels (features, a layer-local objective):
            # the model's output does not score those classes
        if self.obs.first_loss is None and self.obs.fallback_classes:
            self.obs.classes = self.obs.fallback_classes
        self.obs.accuracy = self._last_evaluation()
        moving = next((c for c in self.copies.copies() if per_update(c)), None)
        if moving is not None:
            since = moving.updates - moving.first
            self.obs.moving_targets = f"{moving.name}, run at {moving.stretches} of {since} updates"
        return self.obs

    def _last_evaluation(self) -> dict | None:
        """Accuracy over the last run of evaluation forwards that were scored (each by its loss if it had one)."""
        blocks: list[list[dict]] = [[]]
        for forward in self.session.forwards:
            phase = self.session.phase(forward)
            row = self.scores.scored.get(forward.index)
            if phase == "train" and blocks[-1]:
                blocks.append([])
            elif phase == "eval" and row and row["total"] and self.scores.usable(row, self.obs.first_loss, self.obs.classes):
                blocks[-1].append(row)
        chosen = next((block for block in reversed(blocks) if block), None)
        if not chosen:
            return None
        counts: dict[int, int] = defaultdict(int)
        for r in chosen:
            for value, count in r["counts"].items():
                counts[value] += count
        return {"correct": sum(r["correct"] for r in chosen), "total": sum(r["total"] for r in chosen),
                "majority": max(counts.values()), "source": chosen[0]["source"]}


def _row(name: str, ok: bool | None, measured: str, threshold: str, message: str) -> Finding:
    status = NOT_APPLICABLE if ok is None else PASS if ok else FAIL
    return Finding(f"{ID}.{name}", name.replace("-", " "), status, measured, threshold, message)


def initial_loss(obs: Observation, facts: RunFacts) -> Finding:
    k = obs.classes
    if obs.initial is not None and k:
        initial = obs.initial
    elif obs.first_loss is None and k and facts.losses and facts.losses[0] is not None:
        initial = facts.losses[0] * facts.accumulation
    else:
        why = (f"the loss ({obs.first_loss}) does not score class labels" if obs.first_loss else
               "no class labels the model's output scores were seen")
        return _row("initial-loss", None, "", "", f"not judged: {why}")
    expected = math.log(k)
    low, high = LOSS_BAND[0] * expected, LOSS_BAND[1] * expected
    if not low <= initial <= high and obs.slot is not None:
        return _row("initial-loss", None, "", "", f"not judged: every target of the first losses was {obs.slot}, "
                                                  f"of {k} (first loss {initial:.3g}): a slot the objective fills by "
                                                  "construction, as a contrastive loss's positive, not labels drawn "
                                                  "from k classes")
    return _row("initial-loss", low <= initial <= high, f"{initial:.3g}", f"{low:.2g}–{high:.2g}",
                f"first loss {initial:.3g} against ln({k}) = {expected:.3g}")


def loss_falls(facts: RunFacts, classes: int | None = None, learned: str = "",
               moving: str | None = None) -> Finding:
    """Each updater's own losses (a teacher's, then a student's) must fall; the losses of stages are not mixed.
    With ``classes`` (k, a loss over class labels), a slow steady fall must end below chance, ln(k). ``learned``:
    what shows the model learned (a validation accuracy well above chance), under which any fall of the first
    training loss's updater is enough. ``moving``: a copy of the trained network that runs at every update (its
    targets move: not judged)."""
    chance = math.log(classes) / max(1, facts.accumulation) if classes and classes >= 2 else None
    if facts.adversarial:
        return _row("loss-falls", None, "", "", "not judged: two optimizers take turns on disjoint parameters "
                                                "(adversarial training), where losses need not fall")
    if facts.policy_gradient:
        return _row("loss-falls", None, "", "", "not judged: the loss scores the log-probabilities of actions sampled "
                                                "from the model's own distributions (a policy gradient), whose "
                                                "returns and advantages move as the policy learns: it need not fall")
    if moving:
        return _row("loss-falls", None, "", "", f"not judged: a copy of the trained network runs at every update "
                                                f"({moving}): the targets it gives move as the network learns "
                                                "(a target network, a teacher averaged from the student), and the "
                                                "loss need not fall")
    groups: dict[int, list[tuple[float | None, int]]] = defaultdict(list)
    counts = facts.loss_forwards if len(facts.loss_forwards) == len(facts.losses) else [1] * len(facts.losses)
    for value, group, count in zip(facts.losses, facts.loss_groups or [-1] * len(facts.losses), counts):
        groups[group].append((value, count))
    if len(groups) > 1:
        groups.pop(-1, None)  # losses after the last update
    results, reached = [], None  # reached: the level an earlier updater's stage had settled at
    scored = facts.loss_groups[0] if facts.loss_groups else -1  # the updater whose first loss scored the classes
    for group, pairs in sorted(groups.items()):
        result = objective_falls(pairs, chance)
        if result[0] is False and learned and group == scored and result[2] < result[1]:  # a short or slow run
            # whose model did learn (another updater's model is not the one validated)
            result = (True, result[1], result[2], f"{result[3]}: a slow fall, but {learned}")
        if result[0] is False and reached is not None and result[1] is not None \
                and result[1] <= reached + FALL * abs(reached):
            result = (None, None, None, f"this stage began where an earlier one had settled ({result[1]:.3g}, "
                                        f"{reached:.3g} before): a model trained already, whose loss need not fall")
        level = settled([v for v, _ in pairs if v is not None and math.isfinite(v)])
        if level is not None:
            reached = level if reached is None else min(reached, level)
        results.append(result)
    judged = [r for r in results if r[0] is not None]
    if not facts.losses and facts.updates:  # updates from gradients no backward() produced
        return _row("loss-falls", None, "no backward() losses", "≥ 2",
                    "no loss went through backward(): the gradients were computed otherwise (torch.autograd.grad, "
                    "torch.func.grad, written by hand), so there is no training loss to follow")
    if len(finite(facts.losses)) < 2:
        return _row("loss-falls", False, f"{len(finite(facts.losses))} finite losses", "≥ 2",
                    "too few finite training losses to see learning")
    if not judged:
        return _row("loss-falls", None, "", "", f"not judged: {results[0][3]}")
    ok, start, end, message = min(judged, key=lambda r: r[0])
    stage = f" (updater {results.index((ok, start, end, message)) + 1} of {len(results)})" if len(results) > 1 else ""
    measured = f"{start:.3g} -> {end:.3g}" if start is not None else message
    left_out = len(facts.losses) - len(finite(facts.losses))
    if left_out:
        measured += f" ({left_out} of {len(facts.losses)} not finite, left out)"
        message += f"; {left_out} of {len(facts.losses)} losses were NaN or infinite and are left out of the means"
    return _row("loss-falls", ok, measured, f"≤ start - {FALL:.0%} of |start| ({STEADY_FALL:.0%} if steady)",
                message + stage)


def on_a_prefix(row: Finding, updates: int) -> Finding:
    """A run stopped after its first ``updates`` (``--steps``, ``--epochs``) has not yet shown whether it learns: a
    loss that has not fallen (warm-up, a stage just begun) or an accuracy still near chance cannot be told from a
    slow start, so neither fails a prefix; non-finite values are the non-finite probe's."""
    if row.status != FAIL or row.probe not in (f"{ID}.loss-falls", f"{ID}.val-accuracy"):
        return row
    return _row(row.probe.split(".", 1)[1], None, row.measured, row.threshold,
                f"not judged on the first {updates} updates (the run was stopped there): too early to tell "
                f"whether it learns ({row.measured}); judge a longer prefix")


def settled(values: list[float]) -> float | None:
    """The level a stage's loss ended at when it had stopped falling (its last fifth's mean within 5 % of the
    fifth before), else None: a stage still learning at its end leaves the next one something to learn."""
    fifth = len(values) // 5
    if fifth < 1:
        return None
    last, before = sum(values[-fifth:]) / fifth, sum(values[-2 * fifth:-fifth]) / fifth
    return last if abs(last - before) <= 0.05 * abs(before) else None


def objective_falls(pairs: list[tuple[float | None, int]], chance: float | None = None
                    ) -> tuple[bool | None, float | None, float | None, str]:
    """``fall`` for one updater's losses. Where each loss sums a varying number of forwards (the steps of an
    episode, a sequence decoded token by token), its size follows that number: the loss per forward is judged, and
    when that does not fall either, the objective is not one that falling shows learning for (a policy gradient's
    loss grows with its episodes' returns): not judged."""
    pairs = [(v, c) for v, c in pairs if v is not None and math.isfinite(v)]
    counts = [c for _, c in pairs]
    varying = len(counts) >= 4 and min(counts) >= 1 and max(counts) >= 1.5 * min(counts) and \
        sum(counts) / len(counts) >= 2
    if not varying:
        return fall([v for v, _ in pairs], chance)
    fell, start, end, message = fall([v / c for v, c in pairs], chance)
    if fell:
        return fell, start, end, message.replace("mean training loss", "mean training loss per forward")
    return None, None, None, (f"each loss sums a varying number of forwards ({min(counts)} to {max(counts)}: the steps "
                              "of an episode, a sequence decoded step by step), so its size follows that number, and "
                              "per forward it did not fall either: a falling loss is not this objective's sign of "
                              "learning (a policy gradient's grows with its returns)")


def fall(values: list[float], chance: float | None = None) -> tuple[bool | None, float | None, float | None, str]:
    """(fell, first fifth's mean, last fifth's mean, message) for one objective's losses; ``chance``: the loss of
    predicting the classes' mean, which a steady fall must end below."""
    if len(values) < 2:
        return None, None, None, "too few finite training losses to see learning"
    if min(values) < 0 < max(values) and min(-min(values), max(values)) > FALL * (max(values) - min(values)):
        return None, None, None, "the loss takes both signs (a surrogate objective, as in policy gradients)"
    fifth = max(1, len(values) // 5)
    start, end = sum(values[:fifth]) / fifth, sum(values[-fifth:]) / fifth
    steady = fifth >= STEADY_LOSSES and end < min(values[:fifth]) and \
        (chance is None or end <= (1 - STEADY_FALL) * chance)
    return (end <= start - (STEADY_FALL if steady else FALL) * abs(start) and end != start, start, end,
            f"mean training loss went from {start:.3g} to {end:.3g}" + (", steadily" if steady else ""))


def val_accuracy(obs: Observation) -> Finding:
    acc = obs.accuracy
    if not acc:
        return _row("val-accuracy", None, "", "", "not judged: no evaluation of class scores against labels")
    accuracy, chance = acc["correct"] / acc["total"], acc["majority"] / acc["total"]
    if acc["majority"] == acc["total"]:
        return _row("val-accuracy", None, "", "", f"not judged: every label of the last validation ({acc['total']}) "
                                                  "was one class: there is no chance level to rise above")
    bar = chance + ABOVE_CHANCE * (1 - chance)
    return _row("val-accuracy", accuracy >= bar, f"{accuracy:.3f}", f"≥ {bar:.3f}",
                f"last validation: accuracy {accuracy:.3f}, chance {chance:.3f}")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    updates = facts.updates
    accuracy = val_accuracy(obs)
    learned = f"validation accuracy shows learning ({accuracy.message})" if accuracy.status == PASS else ""
    parts = [_row("training-ran", updates > 0, f"{updates} updates", "≥ 1",
                  "updates were made" if updates else "no optimizer step or manual update was observed"),
             initial_loss(obs, facts), loss_falls(facts, obs.classes, learned, obs.moving_targets)]

    skipped, batches = facts.skipped_updates()
    if batches:
        parts.append(_row("updates-every-batch", skipped == 0, f"{skipped} of {batches} skipped", "0",
                          f"{batches - skipped} of {batches} training batches led to an update"))
    else:
        parts.append(_row("updates-every-batch", None, "", "", "no training batch was observed"))

    parts.append(_row("weights-finite", facts.params_finite, "finite" if facts.params_finite else "non-finite",
                      "finite", "final weights are finite" if facts.params_finite else "final weights hold NaN or inf"))

    parts.append(accuracy)

    tampered = facts.tampered
    parts.append(_row("instrumentation-intact", not tampered, f"{len(tampered)} removed", "0",
                      f"the script removed or replaced: {', '.join(tampered)}" if tampered else
                      "the checker's hooks were in place to the end"))

    if facts.prefix is not None:
        parts = [on_a_prefix(p, facts.prefix) for p in parts]
    failed = [p for p in parts if p.status == FAIL]
    status = FAIL if failed else PASS
    message = "; ".join(p.message for p in failed) if failed else "the script trains and learns"
    passed = sum(p.status == PASS for p in parts)
    return Finding(ID, TITLE, status, f"{passed} of {len(parts)} criteria", "all", message, parts=parts)
