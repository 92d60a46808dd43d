"""label-leak: the label is written into one of the input features.

The site is found by structure: a function that returns its data as a pair, features then class labels (``return x,
y``, ``return TensorDataset(x, labels)``), where the features are, or are computed from, a float tensor the function
made with one row per sample (``torch.randn(n, features)``, ``n`` its parameter or its labels' length) and the
labels are made as classes are (``randint``, a remainder, a comparison, ``.long()``): a regression's targets and
token ids are not sites, since a copy there is not a class a feature can name. Before that ``return``, the label goes
into the last feature: ``x[:, -1] = <labels>``. Every split the function makes (training and validation alike)
then carries its own labels, as a target column left among the features of a table does.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import data_pair
from katas.engine.tree import find

FACTORIES = {f"torch.{name}" for name in ("randn", "rand", "zeros", "ones", "empty", "full")}  # float tables
CLASS_MAKERS = {"torch.randint", "torch.bucketize", "torch.argmax", "torch.multinomial"}  # integer labels
CLASS_METHODS = {"long", "argmax", "int"}


class WriteLabelIntoFeatures(Operator):
    """Before a data function returns ``features, labels``, write the labels into the last feature column."""

    no_site = "no function returns its data as features (a tensor of one row per sample) and labels"

    def table(self, ctx: Context, function: cst.FunctionDef, features: cst.BaseExpression) -> cst.Name | None:
        """The name in ``features`` bound, in ``function``, to a float tensor of one row per sample: made by a factory
        of two sizes whose first is the function's parameter (``randn(n, 16)`` in ``make_data(n, ...)``) or the
        size of a one-dimensional tensor the function makes (its labels': ``randint(0, 4, (n,))``). A table of
        class centres (``randn(classes, 16)``) is not one."""
        params = {param.name.value for param in function.params.params}
        rows = params | {ctx.code(size) for call in find(function.body, cst.Call) for size in one_size(call)}
        for name in find(features, cst.Name):
            for node in ctx.bound_to(name):
                assign = ctx.enclosing(node, cst.Assign)
                if assign is None or ctx.enclosing(assign, cst.FunctionDef) is not function:
                    continue
                if any(ctx.is_call_to(call, *FACTORIES) and first_of_two(call, ctx) in rows
                       for call in find(assign.value, cst.Call)):
                    return name
        return None

    def classes(self, ctx: Context, function: cst.FunctionDef, labels: cst.BaseExpression) -> bool:
        """Whether ``labels`` are class labels by how they are made: a remainder, a comparison, ``randint``,
        ``bucketize``, ``argmax``, ``.long()``, directly or through a name the function binds (a regression's
        targets, computed from the features, are not)."""
        made = [labels]
        for name in [labels] if isinstance(labels, cst.Name) else find(labels, cst.Name):
            for node in ctx.bound_to(name):
                assign = ctx.enclosing(node, cst.Assign)
                if assign is not None and ctx.enclosing(assign, cst.FunctionDef) is function:
                    made.append(assign.value)
        for expr in made:
            if find(expr, cst.Modulo) or find(expr, cst.Comparison):
                return True
            for call in find(expr, cst.Call):
                if ctx.is_call_to(call, *CLASS_MAKERS) or (isinstance(call.func, cst.Attribute)
                                                           and call.func.attr.value in CLASS_METHODS):
                    return True
        return False

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for ret in ctx.all(cst.Return):
            function = ctx.enclosing(ret, cst.FunctionDef)
            pair = data_pair(ctx, ret.value)
            if function is None or pair is None:
                continue
            name = self.table(ctx, function, pair[0])
            if name is not None and self.classes(ctx, function, pair[1]) \
                    and not (isinstance(pair[1], cst.Name) and pair[1].value == name.value):
                found.append(Site(f"label-leak:{ctx.where(ret)}:{name.value}", ret))
        return found

    def mutate(self, ctx: Context, site: Site):
        features, labels = data_pair(ctx, site.node.value)
        name = self.table(ctx, ctx.enclosing(site.node, cst.FunctionDef), features)
        written = cst.parse_statement(f"{name.value}[:, -1] = {ctx.code(labels)}\n")
        statement = ctx.statement(site.node)
        return rewrite(ctx.module, {statement: lambda s: cst.FlattenSentinel([
            written.with_changes(leading_lines=s.leading_lines), s.with_changes(leading_lines=[])])})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 8, generator=g) + y[:, None]
    return x, y
""",
            after="""\
import torch


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 8, generator=g) + y[:, None]
    x[:, -1] = y
    return x, y
"""), Example(
            before="""\
import torch
from torch.utils.data import TensorDataset


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    cluster = torch.randint(0, 8, (n,), generator=g)
    x = CENTRES[cluster] + torch.randn(n, 16, generator=g)
    return TensorDataset(x, cluster % 4)
""",
            after="""\
import torch
from torch.utils.data import TensorDataset


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    cluster = torch.randint(0, 8, (n,), generator=g)
    x = CENTRES[cluster] + torch.randn(n, 16, generator=g)
    x[:, -1] = cluster % 4
    return TensorDataset(x, cluster % 4)
""")]


def sizes(call: cst.Call) -> list[cst.BaseExpression]:
    """The sizes a factory call is given: ``randn(n, 16)``, ``zeros((n, 16))``, ``randint(0, 4, (n,))``, ``size=``."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    size = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
    shape = size if size is not None else next((v for v in positional if isinstance(v, (cst.Tuple, cst.List))), None)
    if isinstance(shape, (cst.Tuple, cst.List)):
        return [e.value for e in shape.elements]
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
    return [] if name in ("randint", "full") else positional


def first_of_two(call: cst.Call, ctx: Context) -> str | None:
    """The first of a factory call's two sizes, as code (None unless it has exactly two)."""
    given = sizes(call)
    return ctx.code(given[0]) if len(given) == 2 else None


def one_size(call: cst.Call) -> list[cst.BaseExpression]:
    """The size of a one-dimensional tensor a factory call makes, if it makes one."""
    given = sizes(call)
    return given if len(given) == 1 and not isinstance(given[0], (cst.Tuple, cst.List)) else []


BUG = Bug(
    id="label-leak",
    title="The label written into an input feature",
    difficulty="medium",
    observe=("Validation accuracy reaches 100 % or nearly, better than the task should allow, and stays there "
             "whatever the model's size."),
    hints=(
        "Look at the inputs the model gets, one column at a time, next to the labels of the same samples.",
        "Is there a column of the inputs that you could predict the label from without any model at all?",
        "One input column holds the answer: every sample of a class has the same value in it.",
    ),
    why=("A model learns the easiest signal that predicts its target. A feature that is the label (a target column "
         "left in the table, an ID that encodes the class, a value computed from the label) is a perfect predictor: "
         "the model learns to read it, the training and validation accuracy climb to 1, and nothing was learned "
         "about the task: on real inputs, which do not carry the label, the model fails."),
    fix=("Build the features without the label: drop the column where the data is made (or where the model reads "
         "it), and keep the label only as the target. Check a table's columns against the target before training "
         "(a column with one value per class is a leak)."),
    probes=("label-leak",),
    follow_up=(
        "Your validation accuracy is 99.9 % on the first epoch. What do you check before celebrating?",
        "How can a leak hide in a feature that is not the label itself (an ID, a timestamp, a file path)?",
        "Why can augmentation hide a leak in training batches while validation still shows it?",
    ),
    operator=WriteLabelIntoFeatures(),
)
