"""metric-count: an evaluation's accuracy divided by the number of batches instead of the number of samples."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import LOADER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import loader_of
from katas.engine.tree import find, method

SAMPLE_COUNTS = {"size", "numel"}  # y.size(0), y.numel()


class BatchCount(Operator):
    """In an evaluation (a loop, or a comprehension, over a DataLoader that runs no ``backward()``), an
    accuracy-like ratio after it, ``correct / n``, whose denominator counts samples (a name summed with
    ``len(y)`` / ``y.size(0)`` / ``y.shape[0]`` in that loop, ``len(loader.dataset)``, or a name set to it),
    gets ``len(loader)`` as its denominator: batches instead of samples. The numerator is accuracy-like when it
    reads a name the same function sets from a comparison (``(pred == y).sum()``, ``pred.eq(y).sum()``)."""

    no_site = "it has no accuracy computed over an evaluation DataLoader with a count of samples as its denominator"

    def sites(self, ctx: Context) -> list[Site]:
        order = {node: i for i, node in enumerate(ctx.parents)}
        found = []
        for node in [*ctx.all(cst.BinaryOperation), *ctx.all(cst.AugAssign)]:
            ratio = parts_of(node)
            if ratio is None:
                continue
            numerator, denominator = ratio
            scope = ctx.enclosing(node, cst.FunctionDef) or ctx.module
            if not counts_hits(ctx, numerator, scope):
                continue
            loader = samples_of(ctx, denominator, scope, node, order)
            if loader is not None:
                found.append(Site(f"metric-count:{ctx.where(node)}:{ctx.code(node)}", node,
                                  guessed=ctx.role(loader).guessed))
        return found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        order = {node: i for i, node in enumerate(ctx.parents)}
        scope = ctx.enclosing(site.node, cst.FunctionDef) or ctx.module
        _, denominator = parts_of(site.node)
        loader = samples_of(ctx, denominator, scope, site.node, order)
        batches = cst.Call(func=cst.Name("len"), args=[cst.Arg(value=loader.deep_clone())])
        return rewrite(ctx.module, {denominator: lambda _: batches.with_changes(lpar=denominator.lpar,
                                                                                  rpar=denominator.rpar)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct, n = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        n += y.size(0)
    return correct / n


val_loader = torch.utils.data.DataLoader(val_set, batch_size=128)
print(f"acc {evaluate(net, val_loader):.3f}")
""",
            after="""\
import torch


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct, n = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
        n += y.size(0)
    return correct / len(loader)


val_loader = torch.utils.data.DataLoader(val_set, batch_size=128)
print(f"acc {evaluate(net, val_loader):.3f}")
"""), Example(
            before="""\
from torch.utils.data import DataLoader

test_loader = DataLoader(test_set, batch_size=250)
hits = sum(int(net(x).argmax(-1).eq(y).sum()) for x, y in test_loader)
print("Accuracy: {:.1f}%".format(100.0 * hits / len(test_loader.dataset)))
""",
            after="""\
from torch.utils.data import DataLoader

test_loader = DataLoader(test_set, batch_size=250)
hits = sum(int(net(x).argmax(-1).eq(y).sum()) for x, y in test_loader)
print("Accuracy: {:.1f}%".format(100.0 * hits / len(test_loader)))
""")]


def parts_of(node: cst.CSTNode) -> tuple[cst.CSTNode, cst.BaseExpression] | None:
    """(numerator, denominator) of ``a / b`` or ``a /= b``; None for anything else."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return node.left, node.right
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
        return node.target, node.value
    return None


def in_scope(ctx: Context, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
    """``node`` belongs to ``scope`` itself (a function, or the module), not to a function nested in it."""
    return (ctx.enclosing(node, cst.FunctionDef) or ctx.module) is scope


def assignments(ctx: Context, scope: cst.CSTNode, name: str) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    """``(statement node, value)`` of each ``name = ...`` / ``name += ...`` in ``scope`` (chained targets too)."""
    found = []
    for node in [*find(scope, cst.Assign), *find(scope, cst.AugAssign)]:
        if not in_scope(ctx, node, scope):
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if any(isinstance(t, cst.Name) and t.value == name for t in targets):
            found.append((node, node.value))
    return found


def compares(expr: cst.CSTNode) -> bool:
    """An equality test inside: ``a == b`` or ``a.eq(b)``."""
    return any(isinstance(c.operator, cst.Equal) for c in find(expr, cst.ComparisonTarget)) \
        or any(method(c) == "eq" for c in find(expr, cst.Call))


def counts_hits(ctx: Context, numerator: cst.CSTNode, scope: cst.CSTNode) -> bool:
    """The numerator reads a name that ``scope`` sets from an equality test (a count of correct predictions)."""
    names = [n.value for n in find(numerator, cst.Name) if not isinstance(ctx.parents.get(n), cst.Attribute)
             or ctx.parents[n].value is n]
    return any(compares(value) for name in names for _, value in assignments(ctx, scope, name))


def evaluation_loops(ctx: Context, scope: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.BaseExpression]]:
    """``(loop or comprehension, the DataLoader it iterates)`` in ``scope`` that run no ``backward()``."""
    found = []
    for loop in [*find(scope, cst.For), *find(scope, cst.CompFor)]:
        body = loop.body if isinstance(loop, cst.For) else ctx.parents[loop]
        loader = loader_of(ctx, loop.iter)
        if loader is not None and in_scope(ctx, loop, scope) and not any(method(c) == "backward" for c in find(body, cst.Call)):
            found.append((loop, loader))
    return found


def dataset_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``loader`` in ``len(loader.dataset)``."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len" and len(expr.args) == 1:
        arg = expr.args[0].value
        if isinstance(arg, cst.Attribute) and arg.attr.value == "dataset":
            return arg.value
    return None


def sample_count(expr: cst.BaseExpression) -> bool:
    """``len(y)``, ``y.size(0)``, ``y.shape[0]``, ``y.numel()``: the size of a batch."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len":
        return True
    if isinstance(expr, cst.Call) and method(expr) in SAMPLE_COUNTS:
        return method(expr) == "numel" or (len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Integer)
                                           and expr.args[0].value.value == "0")
    return (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
            and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, cst.Integer) and expr.slice[0].slice.value.value == "0")


def samples_of(ctx: Context, denominator: cst.BaseExpression, scope: cst.CSTNode, ratio: cst.CSTNode,
               order: dict) -> cst.BaseExpression | None:
    """The evaluation DataLoader whose samples ``denominator`` counts, when the ratio comes after that loop:
    ``len(loader.dataset)``, a name set to it, or a name summing the batches' sizes in the loop."""
    named = assignments(ctx, scope, denominator.value) if isinstance(denominator, cst.Name) else []
    dataset = dataset_of(denominator) or next((dataset_of(v) for n, v in named if isinstance(n, cst.Assign)
                                               and dataset_of(v) is not None), None)
    loops = [(loop, loader) for loop, loader in evaluation_loops(ctx, scope)
             if order[loop] < order[ratio] and loop not in set(ctx.ancestors(ratio))
             and (dataset is not None or ctx.role(loader).kind == LOADER)]
    if dataset is not None:
        return next((found for _, found in loops if ctx.code(found) == ctx.code(dataset)), None)
    summed = [node for node, value in named if isinstance(node, cst.AugAssign)
              and isinstance(node.operator, cst.AddAssign) and sample_count(value)]
    return next((found for loop, found in loops for node in summed if loop in set(ctx.ancestors(node))), None)


BUG = Bug(
    id="metric-count",
    title="Accuracy divided by the number of batches",
    difficulty="easy",
    observe=("Training looks healthy and the validation loss falls, but the validation accuracy the script prints "
             "is far above 1 (it reads like `acc 120.000`) and moves with the batch size."),
    hints=(
        "An accuracy is a fraction of something. A fraction of what, here? Could it ever exceed 1?",
        "Print the numerator and the denominator of the accuracy separately after one evaluation, and the number "
        "of samples in the validation set.",
        "`len()` of a DataLoader is not the number of samples it holds.",
    ),
    why=("The accuracy is the count of correct predictions over the number of samples evaluated. `len(loader)` is "
         "the number of batches the DataLoader yields, so dividing by it gives correct predictions per batch: about "
         "the batch size times the accuracy. The printed metric is meaningless, and any decision made from it "
         "(model selection, early stopping) is made from noise scaled by the batch size."),
    fix=("Divide by the number of samples seen: sum `len(y)` (or `y.size(0)`) over the batches, or use "
         "`len(loader.dataset)` when every sample is evaluated once; `len(loader) * batch_size` is wrong whenever "
         "the last batch is partial."),
    probes=("reported-metric",),
    follow_up=(
        "Your validation set has 500 samples in batches of 128. What does `len(loader) * loader.batch_size` give, "
        "and when is it the right denominator?",
        "Averaging per-batch accuracies: when is it equal to the per-sample accuracy, and when not?",
        "With `drop_last=True` on a validation loader, what does `len(loader.dataset)` overcount?",
        "How would you make such a metric bug impossible to miss in your training logs?",
    ),
    operator=BatchCount(),
)
