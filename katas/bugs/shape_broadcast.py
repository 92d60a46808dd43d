"""shape-broadcast: a model's ``(B, 1)`` output meets a ``(B,)`` target in the loss, which broadcasts to ``(B, B)``."""
from __future__ import annotations

import libcst as cst

from katas.bugs.detach import module_classes
from katas.bugs.softmax_ce import feeds_backward, without_grad
from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import runs_within
from katas.engine.tree import find, is_self_attribute, method

# Losses that refuse an input and a target of different shapes: removing the squeeze there is a crash, not this bug.
STRICT = {f"torch.nn.{name}" for name in ("BCELoss", "BCEWithLogitsLoss", "modules.loss.BCELoss",
                                          "modules.loss.BCEWithLogitsLoss", "functional.binary_cross_entropy",
                                          "functional.binary_cross_entropy_with_logits")}


def squeezed(node: cst.CSTNode) -> cst.BaseExpression | None:
    """``x`` when ``node`` turns a column into a vector: ``x.squeeze(-1)``, ``.squeeze(1)``, ``.squeeze()``,
    ``.view(-1)``, ``.reshape(-1)``, ``.flatten()`` or ``x[:, 0]``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        name, args = method(node), list(node.args)
        if any(a.keyword is not None or a.star for a in args):
            return None
        values = [_integer(a.value) for a in args]
        if (name == "squeeze" and values in ([], [-1], [1]) or name in ("view", "reshape") and values == [-1]
                or name == "flatten" and not args):
            return node.func.value
        return None
    if isinstance(node, cst.Subscript) and len(node.slice) == 2:
        first, second = (s.slice for s in node.slice)
        if isinstance(first, cst.Slice) and first.lower is None and first.upper is None and first.step is None \
                and isinstance(second, cst.Index) and _integer(second.value) == 0:
            return node.value
    return None


def _integer(expr: cst.BaseExpression) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(expr.expression,
                                                                                                    cst.Integer):
        return -int(expr.expression.value)
    return None


def strict_losses(ctx: Context) -> bool:
    """Whether the file uses a loss that refuses mismatched shapes (the binary cross-entropies)."""
    return any(ctx.qualified_names(n) & STRICT for n in [*ctx.all(cst.Name), *ctx.all(cst.Attribute)])


def model_output(ctx: Context, expr: cst.BaseExpression) -> bool | None:
    """Whether ``expr`` is a model's output: a call of a model (True; None when the role was guessed from a name),
    or a name assigned one in the same scope."""
    scope = ctx.enclosing(expr, cst.FunctionDef) or ctx.module
    if isinstance(expr, cst.Call):
        role = ctx.role(expr.func)
        if role.kind is None and isinstance(expr.func, cst.Name):
            return unpacked_model(ctx, scope, expr.func.value)
        return None if role.kind == MODEL and role.guessed else role.kind == MODEL
    if isinstance(expr, cst.Name):
        for assign in find(scope, cst.Assign):
            if any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in assign.targets):
                found = model_output(ctx, assign.value)
                if found is not False:
                    return found
    return False


def unpacked_model(ctx: Context, scope: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is built as a model in a tuple assignment of ``scope``: ``model, aux = Net(), nn.Linear(8, 1)``."""
    for assign in find(scope, cst.Assign):
        target, value = assign.targets[0].target, assign.value
        if len(assign.targets) == 1 and isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
            for t, v in zip(target.elements, value.elements):
                if isinstance(t.value, cst.Name) and t.value.value == name and isinstance(v.value, cst.Call):
                    return ctx.constructed(v.value) == MODEL
    return False


def width(ctx: Context, expr: cst.BaseExpression) -> int | None:
    """The number of outputs a layer built by ``expr`` has, when it says: ``nn.Linear(n, 1)``, ``nn.Bilinear(a, b, 1)``,
    ``out_features=1``, the last layer of an ``nn.Sequential``; None otherwise."""
    if not isinstance(expr, cst.Call):
        return None
    names = {q.rsplit(".", 1)[-1] for q in ctx.qualified_names(expr.func) if q.startswith("torch.nn.")}
    if names & {"Linear", "LazyLinear", "Bilinear"}:
        given = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "out_features"), None)
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        place = {"Linear": 1, "LazyLinear": 0, "Bilinear": 2}[next(iter(names & {"Linear", "LazyLinear", "Bilinear"}))]
        given = given if given is not None else positional[place] if len(positional) > place else None
        return _integer(given) if given is not None else None
    if "Sequential" in names and expr.args and not expr.args[-1].star:
        return width(ctx, expr.args[-1].value)
    return None


def wide_layer(ctx: Context, methods: dict[str, cst.FunctionDef], expr: cst.BaseExpression) -> bool:
    """Whether the outermost layer ``expr`` calls (``self.head(...)``) is built in ``__init__`` with more than one
    output: then the squeeze does not take a column to a vector, and removing it would not broadcast."""
    init = methods.get("__init__")
    call = next((c for c in find(expr, cst.Call) if is_self_attribute(c.func)), None)
    if init is None or call is None:
        return False
    for assign in find(init, cst.Assign):
        target = assign.targets[0].target
        if len(assign.targets) == 1 and is_self_attribute(target) and target.attr.value == call.func.attr.value:
            found = width(ctx, assign.value)
            return found is not None and found != 1
    return False


class KeepColumn(Operator):
    """Remove the squeeze that turns a model's one-column output into one value per example: in the value a model's
    ``forward`` returns (alone or in a tuple), or where training squeezes a model's output before its loss."""

    no_site = ("no model output is squeezed from a column to one value per example (`.squeeze(-1)`, `.view(-1)`, "
               "`[:, 0]` ...) before a loss that would accept both shapes")

    def sites(self, ctx: Context) -> list[Site]:
        if strict_losses(ctx):
            return []
        found: list[Site] = []
        classes = set()
        for cls, methods in module_classes(ctx):
            classes.add(cls)
            forward = methods.get("forward")
            for ret in find(forward, cst.Return) if forward is not None else []:
                values = [e.value for e in ret.value.elements] if isinstance(ret.value, cst.Tuple) else [ret.value]
                found += [Site(f"shape-broadcast:{ctx.where(v)}:{ctx.code(v)}", v) for v in values
                          if v is not None and squeezed(v) is not None and not wide_layer(ctx, methods, squeezed(v))]
        loops = ctx.training_loops()
        for node in [*ctx.all(cst.Call), *ctx.all(cst.Subscript)]:
            inner = squeezed(node)
            if inner is None or any(a in classes for a in ctx.ancestors(node)) or without_grad(ctx, node):
                continue
            output = model_output(ctx, inner)
            if output is False:
                continue
            if feeds_backward(ctx, node) or runs_within(ctx, node, lambda a: a in loops):
                found.append(Site(f"shape-broadcast:{ctx.where(node)}:{ctx.code(node)}", node, guessed=output is None))
        return found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        inner = squeezed(site.node)
        return rewrite(ctx.module, {site.node: lambda node: inner})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)
""",
            after="""\
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x))
"""), Example(
            before="""\
import torch
import torch.nn.functional as F

net = torch.nn.Linear(8, 1)
for x, y in loader:
    opt.zero_grad()
    F.mse_loss(net(x).view(-1), y).backward()
    opt.step()
""",
            after="""\
import torch
import torch.nn.functional as F

net = torch.nn.Linear(8, 1)
for x, y in loader:
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""")]


BUG = Bug(
    id="shape-broadcast",
    title="A (B, 1) prediction against a (B,) target",
    difficulty="medium",
    observe=("Nothing crashes, but the training loss hardly falls below where it started, the model's predictions "
             "are nearly the same for every example, and the accuracy the script prints can even come out above 1."),
    hints=(
        "Print the model's predictions for a few very different examples: how much do they differ?",
        "How many numbers does the loss average at each step? Compare it with the batch size.",
        "Print the shape of the model's output and the shape of the target right before the loss.",
    ),
    why=("The model's head returns one column, shape `(B, 1)`, and the target is a vector, shape `(B,)`. "
         "Element-wise arithmetic broadcasts the two to `(B, B)`: every prediction is compared with every target in "
         "the batch. The mean over that grid is minimised by predicting the batch's mean target for every example, "
         "so each example's gradient depends on the other examples' targets and the model stops learning the "
         "mapping. `F.mse_loss` only warns about the mismatch, and a hand-written loss does not even do that; an "
         "accuracy computed as `(pred > 0) == y` broadcasts the same way and counts B × B comparisons."),
    fix=("Give the prediction and the target the same shape before the loss: squeeze the model's trailing dimension "
         "(`out.squeeze(-1)`, `out.view(-1)`, `out[:, 0]`), or make the target a column (`y.unsqueeze(1)`); an "
         "assertion `assert pred.shape == y.shape` catches it for good."),
    probes=("loss-shapes", "reported-metric"),
    follow_up=(
        "Which PyTorch losses refuse mismatched shapes, and which only warn (or say nothing)?",
        "What does `squeeze()` without an argument do to a batch of one example?",
        "Why is silencing the warning not a fix? What would `(B, B)` do to memory with a batch of 4096?",
        "How would you write the loss so that a shape mismatch raises instead of broadcasting?",
    ),
    operator=KeepColumn(),
)
