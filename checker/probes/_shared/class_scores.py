"""Each forward's class decisions against its batch's labels: what the health gate's validation accuracy and
reported-metric's recomputed accuracies are made of.

A forward is scored from the loss function's own inputs when the loss scores one class label per sample of the
forward's batch (its argmax, or the binary decision), else from the model's output and the batch's labels: k
outputs over labels below k, or one output per sample over 0/1 labels. The loss's own view of a forward wins.
"""
from __future__ import annotations

from collections import defaultdict

from checker.events import Event

OWNER = "class-scores"  # its subscriptions and errors; the probes that read it name it in USES
CLASS_LOSSES = {"cross_entropy": "classes", "nll_loss": "classes", "binary_cross_entropy": "binary",
                "binary_cross_entropy_with_logits": "binary"}


class ClassScores:
    """Made once per session (``session.shared(ClassScores)``)."""

    def __init__(self, session):
        self.session = session
        self.top_label = -1  # the largest class label seen in a batch a forward scored
        self.scored: dict[int, dict] = {}  # forward index -> {"correct", "total", "counts", "hits", "source",
        # "classes"}: "counts" and "hits" per class label, its samples and those decided right
        self.fallback_classes: int | None = None  # k of the first forward with gradients scored from its output
        session.on(Event.LOSS, OWNER, self.on_loss)
        session.on(Event.FORWARD_END, OWNER, self.on_forward_end)

    def on_loss(self, call) -> None:
        decisions = per_sample_decisions(call, self.session)
        if decisions is not None and call.forward is not None:
            self._score(call.forward, *decisions, "loss")

    def on_forward_end(self, forward, output) -> None:
        from checker.tensors import plain, tensors_in

        labels = self.session.labels
        logits = next(iter(tensors_in(output, 1)), None)
        if labels is None or logits is None or not plain(logits) or logits.dim() == 0 \
                or logits.shape[0] != labels.shape[0]:
            return
        labels = labels.long()
        logits = logits.detach()
        low, high = (int(v) for v in labels.aminmax()) if labels.numel() else (0, 0)
        self.top_label = max(self.top_label, high)
        if logits.dim() == 2 and logits.shape[-1] >= 2 and high < logits.shape[-1] and low >= 0:
            k, predicted = logits.shape[-1], logits.argmax(-1)
        elif logits.numel() == len(labels) and bool(((labels == 0) | (labels == 1)).all()):
            flat = logits.reshape(-1).float()
            k, predicted = 2, (flat > (0.5 if bool(((flat >= 0) & (flat <= 1)).all()) else 0.0)).long()
        else:
            return
        if forward.grad and self.fallback_classes is None:
            self.fallback_classes = k
        self._score(forward.index, predicted, labels, "output", k)

    def _score(self, index: int, predicted, labels, source: str, k: int | None = None) -> None:
        row = self.scored.setdefault(index, {"correct": 0, "total": 0, "counts": defaultdict(int),
                                             "hits": defaultdict(int), "source": source, "classes": k})
        if row["source"] != source:
            if source == "output":
                return
            row.update(correct=0, total=0, counts=defaultdict(int), hits=defaultdict(int), source=source)  # the
            # loss's own view wins
        row["total"] += len(labels)
        labels = labels.to(predicted.device)  # a loader's labels stay on the host when the model runs on a GPU
        keys, counts = (2 * labels + (predicted == labels)).unique(return_counts=True)  # one host sync: per label,
        for key, count in zip(keys.tolist(), counts.tolist()):  # its samples decided wrong (even) and right (odd)
            label, right = divmod(int(key), 2)
            row["counts"][label] += count
            if right:
                row["hits"][label] += count
                row["correct"] += count

    def usable(self, row: dict, first_loss: str | None = None, classes: int | None = None) -> bool:
        """The loss's own view of a sample's class; the model's output only where it scores the classes trained on
        (as many outputs as there are labels: not a layer's features)."""
        if row["source"] == "loss":
            return True
        if row["classes"] not in (2, self.top_label + 1):
            return False
        return first_loss is None or (classes is not None and row["classes"] == classes)


def per_sample_decisions(call, session):
    """(predicted, labels) when the loss scores one class label per sample of the forward's batch, else None."""
    kind = CLASS_LOSSES.get(call.kind)
    forward = session.forwards[call.forward] if call.forward is not None else None
    if kind is None or forward is None or not hasattr(call.input, "shape") or not hasattr(call.target, "shape"):
        return None
    scores, target = call.input.detach(), call.target.detach()
    if forward.batch is not None and scores.shape[0] != forward.batch:
        return None  # several labels per sample (tokens of a sequence): not a per-sample classification
    if kind == "classes" and scores.dim() == 2 and target.dim() == 1 and not target.dtype.is_floating_point:
        return scores.argmax(-1), target.long()
    if kind == "binary" and scores.numel() == target.numel() and scores.dim() <= 2 and target.numel() == scores.shape[0]:
        if not bool(((target == 0) | (target == 1)).all()):
            return None
        threshold = 0.0 if call.kind.endswith("logits") else 0.5
        return (scores.reshape(-1) > threshold).long(), target.reshape(-1).long()
    return None


def classes_of(call) -> int | None:
    """k when the loss scores class labels, else None."""
    kind = CLASS_LOSSES.get(call.kind)
    if kind == "classes":
        shape = call.input.shape
        return int(shape[1] if len(shape) >= 2 else shape[0])
    if kind == "binary":
        target = call.target
        return 2 if target.numel() and bool(((target == 0) | (target == 1)).all()) else None
    return None


def mean_per_target(call) -> float:
    return float(call.output.detach().float().mean()) / per_target_divisor(call)


def per_target_divisor(call) -> int:
    """What the loss's mean is divided by to give a mean per target: its targets when it was summed, else 1."""
    if call.reduction != "sum":
        return 1
    per = call.target.numel() if CLASS_LOSSES.get(call.kind) == "binary" or call.target.dim() < call.input.dim() \
        else call.target.numel() // call.target.shape[1]
    return max(1, per)


def slot(call) -> str | None:
    """The slot a class-scoring loss's targets fill by construction, when they do: one class label for every target
    (MoCo's positive, always logit 0), or each row's own position (``arange(B)``: SimCLR's and CLIP's positive on
    the diagonal of a batch-by-batch similarity); else None."""
    import torch

    target = call.target
    if CLASS_LOSSES.get(call.kind) != "classes" or getattr(target, "is_floating_point", lambda: True)():
        return None
    flat = target.detach().reshape(-1)
    if flat.numel() < 2:
        return None
    first = flat[0]
    if bool((flat == first).all()):
        return f"class {int(first)}"
    if target.dim() == 1 and bool((flat == torch.arange(flat.numel(), device=flat.device) + first).all()):
        return "its own row's position (0, 1, 2, ...)"
    return None
