"""decay-groups: a parameter group set apart for biases and normalisation weights is not decayed.

Weight decay pulls every weight it applies to towards 0. The convention (BERT,
GPT-2 and nanoGPT, timm, torchvision's ``--norm-weight-decay 0``) exempts the
one-dimensional parameters: biases, whose size carries no capacity to shrink, and
normalisation scales and shifts, which decay would pull towards a dead or shifted
layer. A script exempts them by giving the optimizer two (or more) parameter
groups: the weight matrices with ``weight_decay > 0``, the rest with 0.

Observed, at each optimizer's first step: its parameter groups (empty ones left
out), each with its weight decay, its other options (``lr``, ``betas``, ``eps``,
``momentum`` ..., strings such as a group's name left out), whether the script's
group dict stated ``weight_decay`` itself (seen as the group is added, before the
optimizer fills in its defaults), and which parameters it holds. The run tells
them apart: a *vector group* holds one-dimensional (or scalar) parameters, and
no more weight matrices than those (embedding weights, of ``nn.Embedding`` /
``nn.EmbeddingBag`` modules the script ran, are not counted as matrices: minGPT
exempts them too); a *matrix group* holds more weight matrices (two or more
dimensions) than one-dimensional parameters. A split by dimension, or by name
("bias", "norm"), gives one of each; groups split by layer or learning rate
hold a layer's weights beside its biases and norms, and are vector groups each,
with no matrix group beside them.

Rule. An optimizer is judged when it has two or more groups, one of them states
its ``weight_decay``, and it has a vector group: the script splits its
parameters and manages decay per group. It fails when a vector group has a
weight decay above 0 (however small: ``1e-12`` is not an exemption but a decay
that does nothing) while every other option of it equals those of a matrix
group: the only difference between the two groups is then which parameters they
hold, which is what a split made for the exemption looks like. It cannot tell
when a decayed vector group differs from every matrix group in another option
(a learning rate of its own, layer-wise learning rates): the split may be for
that, and the decay deliberate. It passes when every vector group of a judged
optimizer has weight decay 0.

Why a correct script cannot fail: one group (``AdamW(model.parameters())``, whose
default decay of 0.01 applies to everything) shows no intent to exempt anything
and is not judged; groups that differ only by learning rate hold matrices in
each; and a script that exempts its biases and normalisation weights sets their
decay to 0. A script that deliberately decays its biases a little, in a group of
their own with every other option the same, fails: no run can tell that from the
mask above. Not applicable: no optimizer stepped, no group applied weight decay,
a single group, no group stating its own ``weight_decay``, or no vector group
beside a matrix group.
Cost: a look at each optimizer's groups at its first step; nothing per step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "decay-groups"
TITLE = "biases and norm weights are not decayed"
SYMPTOM_ID, SYMPTOM = "group-decay", "weight decay of each parameter group"

IGNORED = {"params", "param_names", "weight_decay"}  # not options to compare


@dataclass
class Observation:
    # per optimizer that stepped: {"optimizer": class name, "groups": [{"params", "vectors" (one-dimensional),
    # "embeddings", "matrices" (two or more dimensions, not embeddings), "weight_decay", "lr", "stated" (the
    # script's dict gave weight_decay), "kin" (index of a matrix group with the same other options, or -1)}]}
    optimizers: list[dict] = field(default_factory=list)


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self.torch = torch
        self.seen: set[int] = set()
        self.stated: set[int] = set()  # ids of group dicts that gave weight_decay themselves
        self.optimizers: list[dict] = []
        self.models: dict[int, object] = {}  # top-level modules run: id -> weak reference
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.PARAM_GROUP, ID, self.on_param_group)

    def on_param_group(self, optimizer, param_group) -> None:
        if isinstance(param_group, dict) and "weight_decay" in param_group:
            self.stated.add(id(param_group))

    def on_forward(self, forward) -> None:
        self.models.setdefault(forward.module, forward.ref)

    def on_update(self, update) -> None:
        optimizer = update.optimizer
        if optimizer is None or id(optimizer) in self.seen:
            return
        self.seen.add(id(optimizer))
        self.optimizers.append(self.describe(optimizer))

    def embedding_weights(self) -> set[int]:
        nn = self.torch.nn
        found = set()
        for ref in self.models.values():
            model = ref()
            if model is not None:
                found |= {id(m.weight) for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))}
        return found

    def describe(self, optimizer) -> dict:
        embeddings = self.embedding_weights()
        groups = [g for g in optimizer.param_groups if g["params"]]
        described = []
        for g in groups:
            vectors = sum(p.dim() < 2 for p in g["params"])
            embedded = sum(id(p) in embeddings and p.dim() >= 2 for p in g["params"])
            described.append({"params": len(g["params"]), "vectors": vectors, "embeddings": embedded,
                              "matrices": len(g["params"]) - vectors - embedded,
                              "weight_decay": number(g.get("weight_decay", 0.0)), "lr": number(g.get("lr")),
                              "stated": id(g) in self.stated})
        options = [{k: comparable(v) for k, v in g.items() if k not in IGNORED and not isinstance(v, str)}
                   for g in groups]
        for i, d in enumerate(described):
            d["kin"] = next((j for j, other in enumerate(described)
                             if j != i and is_matrix_group(other) and options[j] == options[i]), -1)
        return {"optimizer": type(optimizer).__name__, "groups": described}

    def summary(self) -> Observation:
        return Observation(self.optimizers)


def number(value) -> float | None:
    """A group option as a float (a tensor learning rate included); None when absent or not a number."""
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError, RuntimeError):
        return None


def comparable(value):
    """A group option in a form ``==`` compares by value (tensors as floats, sequences as tuples)."""
    if hasattr(value, "numel") and hasattr(value, "tolist"):
        return tuple(value.flatten().tolist()) if value.numel() != 1 else float(value)
    if isinstance(value, (list, tuple)):
        return tuple(comparable(v) for v in value)
    return value


def is_vector_group(group: dict) -> bool:
    return group["vectors"] > 0 and group["vectors"] >= group["matrices"]


def is_matrix_group(group: dict) -> bool:
    return group["matrices"] > group["vectors"]


def _group(group: dict) -> str:
    held = f"{group['vectors']} one-dimensional tensors"
    others = [f"{n} {what}" for n, what in ((group["embeddings"], "embedding tables"),
                                            (group["matrices"], "other tensors")) if n]
    return held + (f" with {' and '.join(others)}" if others else "")


def _number(value: float | None) -> str:
    return f"{value:g}" if value is not None else "unknown"


def _lr(group: dict) -> str:
    return f"lr {_number(group['lr'])}"


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.optimizers:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no optimizer stepped", observed="no parameter group was seen in use")
    if not any((g["weight_decay"] or 0) > 0 for o in obs.optimizers for g in o["groups"]):
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no parameter group applied weight decay")
    split = [o for o in obs.optimizers if len(o["groups"]) >= 2]
    if not split:
        return Finding(ID, TITLE, NOT_APPLICABLE,
                       message="one group: no sign the script meant to exempt biases and normalisation weights "
                               "from weight decay")
    stated = [o for o in split if any(g["stated"] for g in o["groups"])]
    if not stated:
        return Finding(ID, TITLE, NOT_APPLICABLE,
                       message="the parameter groups all take the optimizer's weight decay: the script sets no decay "
                               "per group")
    judged = [(o, g) for o in stated if any(is_matrix_group(g) for g in o["groups"])
              for g in o["groups"] if is_vector_group(g)]
    if not judged:
        return Finding(ID, TITLE, NOT_APPLICABLE,
                       message="no parameter group sets biases and normalisation weights apart from the weight "
                               "matrices")
    decayed = [(o, g) for o, g in judged if (g["weight_decay"] or 0) > 0]
    measured, threshold = f"{len(decayed)} of {len(judged)} groups", "0"
    failing = [(o, g) for o, g in decayed if g["kin"] >= 0]
    if failing:
        o, g = failing[0]
        kin = o["groups"][g["kin"]]
        seen = (f"{o['optimizer']}: at the first step, a parameter group of {_group(g)} had weight decay "
                f"{_number(g['weight_decay'])} and the group of {kin['matrices']} weight matrices "
                f"{_number(kin['weight_decay'])}, every other option the same ({_lr(g)})")
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{o['optimizer']}: the parameter group of {_group(g)} (biases and normalisation weights) had "
                       f"weight_decay={_number(g['weight_decay'])} at the first step, every other option equal to those of "
                       f"the group of {kin['matrices']} weight matrices (weight_decay={_number(kin['weight_decay'])}): the "
                       "group set apart to exempt them from weight decay decays them too",
                       observed=seen)
    if decayed:
        o, g = decayed[0]
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                       f"{o['optimizer']}: a parameter group of {_group(g)} had weight_decay={_number(g['weight_decay'])}, "
                       f"but it differs from every group of weight matrices in another option ({_lr(g)}): "
                       "the groups may be split for that, and the decay meant",
                       observed=f"{o['optimizer']}: a parameter group of {_group(g)} had "
                                f"weight_decay={_number(g['weight_decay'])} and options of its own ({_lr(g)})")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   f"the {len(judged)} parameter group(s) of one-dimensional tensors had weight_decay=0 "
                   f"({', '.join(_group(g) for _, g in judged)})")
