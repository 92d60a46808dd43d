"""untied: weight tying replaced by a copy, so the output layer and the embedding are two parameters."""
from __future__ import annotations

import re

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite


def weight_attribute(node: cst.BaseExpression) -> bool:
    """``self.<module>.weight`` (or deeper: ``self.transformer.wte.weight``)."""
    if not (isinstance(node, cst.Attribute) and node.attr.value == "weight"):
        return False
    inner = node.value
    while isinstance(inner, cst.Attribute):
        inner = inner.value
    return isinstance(inner, cst.Name) and inner.value == "self" and isinstance(node.value, cst.Attribute)


class CopyTiedWeight(Operator):
    """In a module's ``__init__``, turn the tie ``self.head.weight = self.emb.weight`` into a copy:
    ``self.head.weight = nn.Parameter(self.emb.weight.clone())``."""

    no_site = "it ties no weights (self.a.weight = self.b.weight in a module's __init__)"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for assign in ctx.all(cst.Assign):
            function = ctx.enclosing(assign, cst.FunctionDef)
            if function is None or function.name.value != "__init__" or len(assign.targets) != 1:
                continue
            if weight_attribute(assign.targets[0].target) and weight_attribute(assign.value):
                found.append(Site(f"untied:{ctx.where(assign)}:{ctx.code(assign)}", assign))
        return found

    @staticmethod
    def nn(ctx: Context) -> str:
        if re.search(r"^\s*(import torch\.nn as nn|from torch import nn)\b", ctx.source, re.M):
            return "nn"
        return "torch.nn"

    def mutate(self, ctx: Context, site: Site):
        source = ctx.code(site.node.value)
        copy = cst.parse_expression(f"{self.nn(ctx)}.Parameter({source}.clone())")
        return rewrite(ctx.module, {site.node: lambda a: a.with_changes(value=copy)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.head = nn.Linear(32, 100, bias=False)
        self.head.weight = self.emb.weight
""",
            after="""\
from torch import nn


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.head = nn.Linear(32, 100, bias=False)
        self.head.weight = nn.Parameter(self.emb.weight.clone())
""")]


BUG = Bug(
    id="untied",
    title="Tied weights copied instead of shared",
    difficulty="medium",
    observe=("The first epoch's training loss is well above what guessing every character uniformly would "
             "score, though training then catches up; the model reports more parameters than its design says it "
             "has, and its saved checkpoint is larger than expected."),
    hints=(
        "Count the model's parameters by hand from its design, then compare with what PyTorch counts.",
        "Two layers are meant to share one matrix. After one training step, are they still the same?",
        "Assigning a Parameter shares it; wrapping a clone of it in a new Parameter creates a second one that "
        "merely starts with the same values.",
    ),
    why=("Weight tying makes the embedding (tokens in) and the output layer (scores out) one matrix, learning "
         "from both uses. `nn.Parameter(self.emb.weight.clone())` builds a second parameter with the same "
         "starting values: each copy now learns from half the signal, they drift apart after the first update, "
         "and the model has V × D parameters more than intended (a large share for a small model)."),
    fix="Assign the parameter itself: `self.head.weight = self.emb.weight` (or compute the logits with "
        "`F.linear(h, self.emb.weight)`). Sharing the storage through `.data` is not a tie: that still makes two "
        "parameters, each updated by the optimizer.",
    probes=("tied-weights",),
    follow_up=(
        "Why does model.parameters() list a tied matrix once, and why does that matter for the optimizer?",
        "How does a state_dict store tied weights, and what must loading do to keep them tied?",
        "Why do large models sometimes untie on purpose?",
    ),
    operator=CopyTiedWeight(),
)
