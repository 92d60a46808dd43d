"""raw-inputs: the inputs' standardisation removed, so the model trains on raw units."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, remove_statements, rewrite
from katas.engine.patterns import runs_within
from katas.engine.tree import find, method, names

CENTRES = {"mean", "nanmean", "std_mean", "var_mean"}  # calls whose result is a centre
SPREADS = {"std", "var", "sqrt", "std_mean", "var_mean"}  # ... and a spread
NOT_INPUTS = {"print", "len", "str", "repr", "float", "int", "isinstance", "type", "id"}


class KeepRawUnits(Operator):
    """Where a script standardises data it feeds a model, ``(A - mean) / std`` with a centre and a spread
    computed in the same function (or at the top level) from ``.mean()`` / ``.std()`` (``torch.std_mean``,
    ``var``, ``sqrt``), every ``(B - mean) / std`` there with the same two names becomes ``B`` (an assignment
    ``B = (B - mean) / std`` goes away), and the statistics' assignment goes too when nothing else reads them.
    Data it feeds a model: the standardised value, or the name it is assigned to, is a call's first positional
    argument (``TensorDataset(x, y)``, ``model(x)``) and never a later one (a target)."""

    no_site = "it standardises no model input with a mean and a standard deviation it computes"

    def sites(self, ctx: Context) -> list[Site]:
        groups = standardisations(ctx)
        return [Site(f"raw-inputs:{ctx.where(found[0])}:{ctx.code(found[0])}", found[0]) for found in groups.values()]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        found = next(found for found in standardisations(ctx).values() if found[0] is site.node)
        centre, spread = statistic_names(site.node)
        scope = scope_of(ctx, site.node)
        statements = ctx.all(cst.SimpleStatementLine)
        doomed = [ctx.statement(node) for node in found if identity(ctx, ctx.statement(node), set(found))]
        readers = [n for n in ctx.all(cst.Name) if n.value in (centre, spread) and ctx.is_read(n)
                   and not in_any(ctx, n, found) and not assigned(ctx, n)]
        if not readers:
            doomed += [s for s in statistics(ctx, scope, centre, spread) if set(targets(s)) <= {centre, spread}]
        unchanged = rewrite(ctx.module, {node: lambda _, node=node: raw(node) for node in found})
        if not doomed:
            return unchanged
        after = Context.of(unchanged.code)  # statements keep their order: find the doomed ones by position
        kept = after.all(cst.SimpleStatementLine)
        return remove_statements(after, [kept[statements.index(s)] for s in dict.fromkeys(doomed)])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

x_train, y_train = load("train")
x_val, y_val = load("val")
mu = x_train.mean(dim=0, keepdim=True)
sigma = x_train.std(dim=0, keepdim=True)
x_train = (x_train - mu) / sigma
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset((x_val - mu) / sigma, y_val), batch_size=256)
""",
            after="""\
import torch
from torch.utils.data import DataLoader, TensorDataset

x_train, y_train = load("train")
x_val, y_val = load("val")
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=256)
""")]


def scope_of(ctx: Context, node: cst.CSTNode) -> cst.CSTNode:
    return ctx.enclosing(node, cst.FunctionDef) or ctx.module


def statistic_names(node: cst.BinaryOperation) -> tuple[str, str]:
    """(centre, spread) of ``(A - centre) / spread``."""
    return node.left.right.value, next(n.value for n in names(node.right))


def targets(statement: cst.SimpleStatementLine) -> list[str]:
    """The names a line ``a = ...`` / ``a, b = ...`` assigns (empty for anything else)."""
    found = []
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for t in small.targets:
                items = [e.value for e in t.target.elements] if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
                found += [i.value if isinstance(i, cst.Name) else "" for i in items]
    return found


def value_of(statement: cst.SimpleStatementLine, name: str) -> cst.BaseExpression | None:
    """What ``statement`` assigns to ``name``: its element of a tuple, or the whole value."""
    for small in statement.body:
        if not isinstance(small, cst.Assign):
            continue
        for t in small.targets:
            items = [e.value for e in t.target.elements] if isinstance(t.target, (cst.Tuple, cst.List)) else [t.target]
            for i, item in enumerate(items):
                if isinstance(item, cst.Name) and item.value == name:
                    value = small.value
                    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(items):
                        return value.elements[i].value
                    return value
    return None


def calls_any(expr: cst.CSTNode, wanted: set[str]) -> bool:
    return any((method(c) or (c.func.value if isinstance(c.func, cst.Name) else "")) in wanted
               for c in find(expr, cst.Call))


def statistics(ctx: Context, scope: cst.CSTNode, centre: str, spread: str) -> list[cst.SimpleStatementLine]:
    """Lines of ``scope`` that compute ``centre`` or ``spread``."""
    lines = [s for s in find(scope, cst.SimpleStatementLine) if scope_of(ctx, s) is scope]
    return [s for s in lines if centre in targets(s) or spread in targets(s)]


def is_statistic(ctx: Context, scope: cst.CSTNode, name: str, wanted: set[str]) -> bool:
    values = [value_of(s, name) for s in statistics(ctx, scope, name, name)]
    return bool(values) and all(v is not None and calls_any(v, wanted) for v in values)


def standardisation(ctx: Context, node: cst.CSTNode) -> tuple[str, str] | None:
    """(centre, spread) when ``node`` is ``(A - centre) / spread`` on computed statistics, outside a model."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide)):
        return None
    left = node.left
    if not (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract) and left.lpar
            and isinstance(left.right, cst.Name)):
        return None
    spreads = {n.value for n in names(node.right)}
    if len(spreads) != 1 or find(node.right, cst.Call, cst.Attribute, cst.Subscript):
        return None
    centre, spread = left.right.value, spreads.pop()
    scope = scope_of(ctx, node)
    owner = ctx.enclosing(node, cst.ClassDef)
    if owner is not None and ctx.is_module_class(owner.name.value):
        return None  # a normalisation inside a model's forward is part of the model
    if not (is_statistic(ctx, scope, centre, CENTRES) and is_statistic(ctx, scope, spread, SPREADS)):
        return None
    return centre, spread


def standardisations(ctx: Context) -> dict[tuple, list[cst.BinaryOperation]]:
    """Standardisations by (scope, centre, spread), in source order, where one of them feeds a model's input and
    none runs in every training step."""
    loops = set(ctx.training_loops())
    groups: dict[tuple, list[cst.BinaryOperation]] = {}
    for node in ctx.all(cst.BinaryOperation):
        found = standardisation(ctx, node)
        if found is not None and not runs_within(ctx, node, lambda a: a in loops):
            groups.setdefault((id(scope_of(ctx, node)), *found), []).append(node)
    return {key: found for key, found in groups.items() if any(feeds_input(ctx, node) for node in found)}


def feeds_input(ctx: Context, node: cst.CSTNode) -> bool:
    """The value is a call's first positional argument, directly or through the name it is assigned to, and that
    name is never a later positional argument (a target, as in ``TensorDataset(x, y)``)."""
    if argument_position(ctx, node) == 0:
        return True
    statement = ctx.statement(node)
    assigned_to = [t for t in targets(statement) if t and value_of(statement, t) is node]
    positions = [argument_position(ctx, n) for n in ctx.all(cst.Name) if assigned_to and n.value == assigned_to[0]]
    positions = [p for p in positions if p is not None]
    return 0 in positions and all(p == 0 for p in positions)


def argument_position(ctx: Context, node: cst.CSTNode) -> int | None:
    """Its index among the positional arguments of the call it is passed to (None when it is not one)."""
    arg = ctx.parents.get(node)
    call = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or arg.keyword is not None or arg.star or node is call.func:
        return None
    if isinstance(call.func, cst.Name) and call.func.value in NOT_INPUTS:
        return None
    return list(call.args).index(arg)


def raw(node: cst.BinaryOperation) -> cst.BaseExpression:
    """``A`` of ``(A - centre) / spread``, keeping the parentheses the whole had."""
    inner = node.left.left
    return inner.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else inner


def identity(ctx: Context, statement: cst.CSTNode, found: set) -> bool:
    """``A = (A - centre) / spread`` (or a tuple of such): without the standardisation it would assign nothing."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return False
    target, value = small.targets[0].target, small.value
    pairs = [(target, value)]
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
    return all(v in found and ctx.code(t) == ctx.code(v.left.left) for t, v in pairs)


def in_any(ctx: Context, node: cst.CSTNode, roots: list[cst.CSTNode]) -> bool:
    return any(a in roots for a in ctx.ancestors(node))


def assigned(ctx: Context, name: cst.Name) -> bool:
    """``name`` is a target of an assignment (alone, or in a tuple)."""
    for a in ctx.ancestors(name):
        if isinstance(a, cst.AssignTarget):
            return True
        if not isinstance(a, (cst.Tuple, cst.List, cst.Element)):
            return False
    return False


BUG = Bug(
    id="raw-inputs",
    title="Inputs fed in raw units",
    difficulty="medium",
    observe=("Nothing in the log looks wrong: the loss falls and the validation accuracy ends high. But print the "
             "first batch the model receives: its values sit around 100, give or take 40."),
    hints=(
        "Look at the numbers the model actually receives in its first batch: their mean and their spread.",
        "Compare the scale of one input feature with what the first layer's initialisation expects.",
        "Follow the data from where it is made to the Dataset: is it still centred and scaled on the way?",
    ),
    why=("Layer initialisations (Kaiming, Xavier) assume inputs of about unit scale. Features around 100 ± 40 make "
         "the first layer's pre-activations and its weight gradients about a hundred times too large, and the offset "
         "of 100 swamps the differences between samples that carry the signal. Here a BatchNorm right after the first "
         "Linear re-centres and re-scales that layer's outputs, which hides most of the damage; without one, or with a "
         "saturating activation, the first loss is far from ln(k) and training starts badly or not at all. Under "
         "gradient clipping, the first layer's inflated gradient also takes most of the norm."),
    fix=("Standardise the inputs with statistics of the training set, `(x - mean) / std` per feature, and apply the "
         "same statistics to the validation and test data (never their own). A first `BatchNorm1d` on the raw "
         "features, or scaling into [0, 1] by the training range, works too."),
    probes=("input-scale",),
    follow_up=(
        "Why must the validation set be standardised with the training set's statistics rather than its own?",
        "Your first layer is followed by BatchNorm. Which of the raw inputs' effects does it undo, and which not?",
        "Images in [0, 255]: what do `ToTensor()` and `Normalize(mean, std)` each do, and is either enough alone?",
        "How would you scale a feature with a heavy tail, or one that is a category code?",
    ),
    operator=KeepRawUnits(),
)
