"""decay-norm: the parameter group meant to exempt biases and normalisation weights from weight decay decays them.

The bug keeps the two groups and gives the no-decay group the decay group's value. Merging them into one group
(``AdamW(model.parameters())``) would be the same mistake in effect, but at run time it cannot be told from a plain,
common and correct single-group optimizer; two groups that differ only in which parameters they hold can be.
"""
from __future__ import annotations

import ast

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find

KEY = "weight_decay"


def weight_decay(group: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ``weight_decay`` of a group written ``{"params": ..., "weight_decay": v}`` or ``dict(..., weight_decay=v)``."""
    if isinstance(group, cst.Dict):
        for element in group.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                    and element.key.evaluated_value == KEY:
                return element.value
    if isinstance(group, cst.Call) and isinstance(group.func, cst.Name) and group.func.value == "dict":
        return next((a.value for a in group.args if a.keyword is not None and a.keyword.value == KEY), None)
    return None


def is_zero(value: cst.BaseExpression) -> bool:
    return isinstance(value, (cst.Integer, cst.Float)) and ast.literal_eval(value.value) == 0


def group_list(ctx: Context, call: cst.Call) -> cst.List | None:
    """The literal list of groups an optimizer is built from: its first argument (or ``params=``), written there,
    assigned to the name (or ``self`` attribute) passed, or returned by the function of the file called there."""
    given = next((a.value for a in call.args if a.keyword is None and not a.star), None)
    if given is None:
        given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "params"), None)
    if isinstance(given, cst.List) or given is None:
        return given
    if isinstance(given, cst.Call) and isinstance(given.func, cst.Name) and given.func.value in ctx.functions:
        return next((r.value for r in find(ctx.functions[given.func.value], cst.Return)
                     if isinstance(r.value, cst.List)), None)
    key = ctx.binding(given)
    if key is None:
        return None
    for assign in ctx.all(cst.Assign):
        if isinstance(assign.value, cst.List) and any(ctx.binding(t.target) == key for t in assign.targets
                                                       if isinstance(t.target, (cst.Name, cst.Attribute))):
            return assign.value
    return None


class DecayTheNoDecayGroup(Operator):
    """In the parameter groups given to an optimizer (a list of dicts, directly or through a name), give a group
    whose ``weight_decay`` is a literal zero the ``weight_decay`` of the first group whose value is not."""

    no_site = ("no optimizer is given parameter groups (a list of dicts) in which one group's weight_decay is 0 "
               "and another's is not")

    def sites(self, ctx: Context) -> list[Site]:
        sites, seen = [], set()
        for call in ctx.all(cst.Call):
            if ctx.constructed(call) != OPTIMIZER or (groups := group_list(ctx, call)) is None or groups in seen:
                continue
            seen.add(groups)
            values = [(element.value, weight_decay(element.value)) for element in groups.elements]
            if any(v is not None and not is_zero(v) for _, v in values):
                sites += [Site(f"decay-norm:{ctx.where(groups)}:{ctx.code(group)}", v)
                          for group, v in values if v is not None and is_zero(v)]
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        groups = next(a for a in ctx.ancestors(site.node) if isinstance(a, cst.List))
        decayed = next(v for element in groups.elements
                       if (v := weight_decay(element.value)) is not None and not is_zero(v))
        return rewrite(ctx.module, {site.node: lambda _: decayed.deep_clone()})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
groups = [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(groups, lr=3e-4)
""",
            after="""\
import torch

decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
groups = [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.05}]
optimizer = torch.optim.AdamW(groups, lr=3e-4)
"""), Example(
            before="""\
from torch import optim


def configure_optimizers(model, weight_decay, lr):
    params = [p for p in model.parameters() if p.requires_grad]
    return optim.AdamW([
        dict(params=[p for p in params if p.dim() >= 2], weight_decay=weight_decay),
        dict(params=[p for p in params if p.dim() < 2], weight_decay=0),
    ], lr=lr)
""",
            after="""\
from torch import optim


def configure_optimizers(model, weight_decay, lr):
    params = [p for p in model.parameters() if p.requires_grad]
    return optim.AdamW([
        dict(params=[p for p in params if p.dim() >= 2], weight_decay=weight_decay),
        dict(params=[p for p in params if p.dim() < 2], weight_decay=weight_decay),
    ], lr=lr)
""")]


BUG = Bug(
    id="decay-norm",
    title="Biases and normalisation weights are decayed",
    difficulty="hard",
    observe=("Training looks normal and accuracy is fine. Yet the biases and the normalisation layers' scales and "
             "shifts shrink a little at every step, even where their gradients are zero, just as the weight "
             "matrices do."),
    hints=(
        "Print each parameter group of the optimizer at the first step: what differs between them?",
        "The script splits its parameters into two groups. What was the second group made for?",
        "Look at the weight_decay of the group that holds the biases and normalisation weights.",
    ),
    why=("Weight decay pulls every parameter it applies to towards 0. The convention exempts one-dimensional "
         "parameters: a bias's size carries no capacity to regularise, and decaying a normalisation layer's scale "
         "pulls it towards a dead layer. Here the group built to hold them has the same weight_decay as the weight "
         "matrices, so the split does nothing and they are decayed."),
    fix="Set the no-decay group's `weight_decay` back to `0.0` (a tiny value such as 1e-12 is still decay).",
    probes=("decay-groups",),
    follow_up=(
        "Why is weight decay usually not applied to biases and LayerNorm/BatchNorm parameters?",
        "How do Adam's `weight_decay` and AdamW's differ?",
        "Which parameters would you put in the no-decay group of a transformer, and how would you find them by name?",
    ),
    operator=DecayTheNoDecayGroup(),
)
