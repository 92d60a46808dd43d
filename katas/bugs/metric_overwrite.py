"""metric-overwrite: the count of correct predictions is overwritten at each batch instead of summed.

Sites: inside a ``for`` loop, an augmented assignment ``name += ...`` (or ``counts[i] += ...``) whose value counts
matches, a comparison for equality (``(pred == y).sum()``, ``pred.eq(y).sum()``), where the name (or the
subscripted name) is set before the innermost loop around it, in the same function. The
edit turns ``+=`` into ``=``: after the loop the count is the last batch's, while the denominator still counts
every sample.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.metric_count import compares
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite


def root_name(target: cst.BaseExpression) -> str | None:
    """``correct`` of ``correct`` or ``counts`` of ``counts[0]``."""
    if isinstance(target, cst.Subscript):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None


class OverwriteCount(Operator):
    """Turn ``correct += (pred == y).sum()`` inside a loop into ``correct = ...``."""

    no_site = "no loop adds a count of matches (correct += (pred == y).sum()) to a name set before it"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for node in ctx.all(cst.AugAssign):
            if not isinstance(node.operator, cst.AddAssign) or not compares(node.value):
                continue
            loop, name = ctx.enclosing(node, (cst.For, cst.FunctionDef, cst.ClassDef)), root_name(node.target)
            if not isinstance(loop, cst.For) or name is None or not self.set_before(ctx, loop, name):
                continue
            found.append(Site(f"metric-overwrite:{ctx.where(node)}:{ctx.code(node.target)}", node))
        return found

    def set_before(self, ctx: Context, loop: cst.For, name: str) -> bool:
        """Whether ``name`` is assigned in the function (or module) around ``loop``, before it."""
        scope = ctx.enclosing(loop, cst.FunctionDef)
        order = {node: i for i, node in enumerate(ctx.parents)}  # the nodes in source order
        for assign in ctx.all(cst.Assign):
            if ctx.enclosing(assign, cst.FunctionDef) is not scope or order[assign] > order[loop]:
                continue
            for target in assign.targets:
                named = [e.value for e in target.target.elements] if isinstance(target.target, cst.Tuple) \
                    else [target.target]
                if any(isinstance(n, cst.Name) and n.value == name for n in named):
                    return True
        return False

    def mutate(self, ctx: Context, site: Site):
        def overwritten(node: cst.AugAssign) -> cst.CSTNode:
            return cst.Assign(targets=[cst.AssignTarget(target=node.target)], value=node.value,
                              semicolon=node.semicolon)

        return rewrite(ctx.module, {site.node: overwritten})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


@torch.no_grad()
def accuracy(model, loader):
    correct, seen = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    return correct / seen
""",
            after="""\
import torch


@torch.no_grad()
def accuracy(model, loader):
    correct, seen = 0, 0
    for x, y in loader:
        correct = (model(x).argmax(1) == y).sum().item()
        seen += len(y)
    return correct / seen
"""), Example(
            before="""\
import torch


def evaluate(model, loader):
    counts = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            counts[0] += model(x).argmax(1).eq(y).sum()
            counts[1] += len(y)
    return (counts[0] / counts[1]).item()
""",
            after="""\
import torch


def evaluate(model, loader):
    counts = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            counts[0] = model(x).argmax(1).eq(y).sum()
            counts[1] += len(y)
    return (counts[0] / counts[1]).item()
""")]


BUG = Bug(
    id="metric-overwrite",
    title="Correct predictions counted from the last batch only",
    difficulty="easy",
    observe=("Training looks healthy and the validation loss falls, but the printed validation accuracy stays far "
             "below what the loss suggests, and barely moves from epoch to epoch."),
    hints=(
        "Print the number of correct predictions and the number of samples after one evaluation. Do they belong "
        "together?",
        "Follow the count of correct predictions through the evaluation loop, batch by batch.",
        "The count of correct predictions is assigned at each batch instead of added to: after the loop it holds "
        "the last batch's, divided by every sample evaluated.",
    ),
    why=("An accuracy over a loader sums the correct predictions of every batch and divides by every sample. With "
         "`=` in place of `+=`, each batch overwrites the count, so the numerator is the last batch's correct "
         "predictions while the denominator still counts the whole set: the metric comes out at roughly the last "
         "batch's share of the data, whatever the model does. Model selection and early stopping then follow the "
         "size of the last batch."),
    fix=("Add each batch's count: `correct += (pred == y).sum().item()`; or collect the predictions and compute the "
         "accuracy once after the loop (`torch.cat(preds).eq(torch.cat(labels)).float().mean()`)."),
    probes=("reported-metric",),
    follow_up=(
        "How would a unit test of the evaluation function catch this with a two-batch loader?",
        "Why is collecting predictions and computing the metric once after the loop harder to get wrong?",
        "Which metrics cannot be averaged per batch at all (precision, AUC), and how are they computed over a loader?",
    ),
    operator=OverwriteCount(),
)
