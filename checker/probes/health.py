"""health: the script still trains. A "fix" that deletes the training fails here.

Criteria (each shown as its own row):

* training ran: at least one optimizer step;
* initial loss near ln(k) for k classes (k from the model's output width; two
  for a single logit), between half and twice ln(k), with the first backward's
  loss scaled by the gradient-accumulation factor;
* training loss falls: the mean of the last fifth of the losses is at most 90 %
  of the mean of the first fifth;
* every training batch leads to an optimizer update (k-step accumulation allowed);
* parameters are finite at the end;
* validation accuracy in the last evaluation pass, from the model's outputs and
  the batch's labels, is at least a quarter of the way from chance (the majority
  class) to perfect;
* the checker's instrumentation is intact at the end: a script that removes its
  hooks or replaces what it wrapped is not trusted to have passed anything.
"""
from __future__ import annotations

import math
from collections import defaultdict

from checker.facts import accumulation, finite, skipped_updates
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "health"
TITLE = "training health"
LOSS_BAND = (0.5, 2.0)
FALL = 0.9
ABOVE_CHANCE = 0.25


class Observer:
    def __init__(self, session):
        self.session = session
        self.classes: int | None = None
        self.accuracy: dict[int, dict] = defaultdict(lambda: {"correct": 0, "total": 0, "counts": defaultdict(int)})
        session.on("output", ID, self.on_output)

    def on_output(self, module, output) -> None:
        labels, current = self.session.labels, self.session.current
        logits = output if hasattr(output, "shape") else first_tensor(output)
        if logits is None or logits.dim() == 0:
            return
        if self.classes is None and logits.grad_fn is not None:
            self.classes = logits.shape[-1] if logits.dim() >= 2 and logits.shape[-1] >= 2 else 2
        if labels is None or current is None or logits.shape[0] != labels.shape[0]:
            return
        logits = logits.detach()
        if logits.dim() >= 2 and logits.shape[-1] >= 2:
            predicted = logits.reshape(len(labels), -1).argmax(-1)
        elif logits.numel() == len(labels):
            flat = logits.reshape(-1).float()
            predicted = (flat > (0.5 if bool(((flat >= 0) & (flat <= 1)).all()) else 0.0)).long()
        else:
            return
        row = self.accuracy[current.index]
        labels = labels.long()
        row["correct"] += int((predicted == labels).sum())
        row["total"] += len(labels)
        for value, count in zip(*labels.unique(return_counts=True)):
            row["counts"][int(value)] += int(count)

    def summary(self) -> dict:
        evals = [i for i in self.accuracy if self.session.role(i) == "eval" and self.accuracy[i]["total"]]
        last = self.accuracy[max(evals)] if evals else None
        return {
            "classes": self.classes,
            "accuracy": None if last is None else {
                "correct": last["correct"], "total": last["total"], "majority": max(last["counts"].values())},
        }


def first_tensor(output):
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    return next((t for t in items if hasattr(t, "shape")), None)


def _row(name: str, ok: bool | None, measured: str, threshold: str, message: str) -> Finding:
    status = NOT_APPLICABLE if ok is None else PASS if ok else FAIL
    return Finding(f"{ID}.{name}", name.replace("-", " "), status, measured, threshold, message)


def judge(obs: dict, facts: dict) -> Finding:
    losses = facts["losses"]
    steps = facts["steps"]
    parts = [_row("training-ran", steps > 0, f"{steps} steps", "≥ 1",
                  "optimizer steps were taken" if steps else "no optimizer step was observed")]

    k = obs["classes"]
    if losses and losses[0] is not None and k:
        initial, expected = losses[0] * accumulation(facts), math.log(k)
        low, high = LOSS_BAND[0] * expected, LOSS_BAND[1] * expected
        parts.append(_row("initial-loss", low <= initial <= high, f"{initial:.3g}", f"{low:.2g}–{high:.2g}",
                          f"first loss {initial:.3g} against ln({k}) = {expected:.3g}"))
    else:
        parts.append(_row("initial-loss", None, "", "", "no initial loss or class count was observed"))

    values = finite(losses)
    if len(values) >= 2:
        fifth = max(1, len(values) // 5)
        start, end = sum(values[:fifth]) / fifth, sum(values[-fifth:]) / fifth
        parts.append(_row("loss-falls", 0 < start and end <= FALL * start, f"{start:.3g} -> {end:.3g}", f"≤ {FALL:.0%} of start",
                          f"mean training loss went from {start:.3g} to {end:.3g}"))
    else:
        parts.append(_row("loss-falls", False, f"{len(values)} finite losses", ">= 2",
                          "too few finite training losses to see learning"))

    skipped, batches = skipped_updates(facts)
    parts.append(_row("updates-every-batch", skipped == 0 and batches > 0, f"{skipped} of {batches} skipped",
                      "0", f"{batches - skipped} of {batches} training batches led to an update"))

    parts.append(_row("weights-finite", facts["params_finite"], "finite" if facts["params_finite"] else "non-finite",
                      "finite", "final weights are finite" if facts["params_finite"] else "final weights hold NaN or inf"))

    acc = obs["accuracy"]
    if acc:
        accuracy, chance = acc["correct"] / acc["total"], acc["majority"] / acc["total"]
        bar = chance + ABOVE_CHANCE * (1 - chance)
        parts.append(_row("val-accuracy", accuracy >= bar, f"{accuracy:.3f}", f"≥ {bar:.3f}",
                          f"last validation pass: accuracy {accuracy:.3f}, chance {chance:.3f}"))
    else:
        parts.append(_row("val-accuracy", None, "", "", "no validation pass with labels was observed"))

    tampered = facts.get("tampered", [])
    parts.append(_row("instrumentation-intact", not tampered, f"{len(tampered)} removed", "0",
                      f"the script removed or replaced: {', '.join(tampered)}" if tampered else
                      "the checker's hooks were in place to the end"))

    failed = [p for p in parts if p.status == FAIL]
    status = FAIL if failed else PASS
    message = "; ".join(p.message for p in failed) if failed else "the script trains and learns"
    passed = sum(p.status == PASS for p in parts)
    return Finding(ID, TITLE, status, f"{passed} of {len(parts)} criteria", "all", message, parts=parts)
