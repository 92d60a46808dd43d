"""functional-dropout: a dropout module becomes ``F.dropout(h, p)``, which drops in evaluation too."""
from __future__ import annotations

import libcst as cst

from katas.bugs.detach import called_from_forward, module_classes, submodule_calls
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, remove_statements, rewrite
from katas.engine.tree import find, is_self_attribute

DROPOUT = {"torch.nn.Dropout", "torch.nn.modules.dropout.Dropout"}
FUNCTIONAL = "torch.nn.functional"


def dropout_modules(ctx: Context, init: cst.FunctionDef) -> dict[str, tuple[cst.CSTNode, cst.BaseExpression]]:
    """``self.name = nn.Dropout(p)`` lines of ``__init__``: name -> (the statement, the rate)."""
    found = {}
    for assign in find(init, cst.Assign):
        value = assign.value
        if len(assign.targets) != 1 or not is_self_attribute(assign.targets[0].target) \
                or not isinstance(value, cst.Call) or not ctx.is_call_to(value, *DROPOUT):
            continue
        rate = next((a.value for a in value.args if a.keyword is None or a.keyword.value == "p"), cst.Float("0.5"))
        found[assign.targets[0].target.attr.value] = (ctx.statement(assign), rate)
    return found


def rate_in_forward(init: cst.FunctionDef, rate: cst.BaseExpression, name: str) -> tuple[cst.BaseExpression, bool]:
    """The rate as ``forward`` can write it, and whether the module must stay. A rate that reads a parameter of
    ``__init__`` (``nn.Dropout(dropout)``, ``nn.Dropout(cfg.p)``), which ``forward`` cannot see: the parameter's
    default when the rate is that parameter and its default a constant, else the module's own ``self.name.p`` (the
    module is kept). Anything else (a constant, a module-level name, ``self.p``) as it is."""
    params = {p.name.value: p for p in init.params.params if p.name.value != "self"}
    read = {n.value for n in find(rate, cst.Name)} | ({rate.value} if isinstance(rate, cst.Name) else set())
    if not read & params.keys():
        return rate, False
    default = params[rate.value].default if isinstance(rate, cst.Name) else None
    if isinstance(default, (cst.Float, cst.Integer)):
        return default, False
    return cst.parse_expression(f"self.{name}.p"), True


def functional_prefix(ctx: Context) -> str:
    """How this script can name ``torch.nn.functional``: its own alias (``F``) if it has one."""
    for name in ctx.all(cst.Name):
        if ctx.qualified_names(name) == {FUNCTIONAL}:
            return name.value
    if any(ctx.qualified_names(n) == {"torch.nn"} for n in ctx.all(cst.Name)):
        return "nn.functional"
    return "torch.nn.functional"


class DropoutToFunctional(Operator):
    """In a module's ``forward``, replace the call of a dropout module built in ``__init__`` with
    ``F.dropout(h, p)`` (``training`` left at its default, True); the module goes when nothing else uses it."""

    no_site = "no model's forward() calls a dropout module of its own (self.drop(h), built in __init__)"

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for _, methods in module_classes(ctx):
            dropouts = dropout_modules(ctx, methods["__init__"]) if "__init__" in methods else {}
            for function in called_from_forward(methods):
                sites += [Site(f"functional-dropout:{ctx.where(c)}:{ctx.code(c)}", c) for c in submodule_calls(function)
                          if c.func.attr.value in dropouts and len(c.args) == 1 and c.args[0].keyword is None]
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        cls = ctx.enclosing(site.node, cst.ClassDef)
        init = next(f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__")
        name = site.node.func.attr.value
        statement, rate = dropout_modules(ctx, init)[name]
        rate, keep = rate_in_forward(init, rate, name)
        call = cst.parse_expression(f"{functional_prefix(ctx)}.dropout(h, p)")
        call = call.with_changes(args=[site.node.args[0].with_changes(comma=call.args[0].comma), call.args[1].with_changes(
            value=rate)])
        uses = [a for a in ctx.all(cst.Attribute) if is_self_attribute(a) and a.attr.value == name
                and ctx.enclosing(a, cst.ClassDef) is cls]
        module = rewrite(ctx.module, {site.node: lambda _: call})
        if keep or len(uses) > 2:  # the assignment and the call: anything more keeps the module
            return module
        changed = Context.of(module.code)
        doomed = [s for s in changed.all(cst.SimpleStatementLine) if changed.code(s) == ctx.code(statement)]
        return remove_statements(changed, doomed[:1])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = F.relu(self.body(x))
        return self.head(self.drop(h))
""",
            after="""\
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = F.relu(self.body(x))
        return self.head(F.dropout(h, 0.3))
""")]


BUG = Bug(
    id="functional-dropout",
    title="Functional dropout that ignores evaluation mode",
    difficulty="hard",
    observe=("The model trains as before, and `model.eval()` is called before validation, yet validation accuracy "
             "changes from one evaluation of the same checkpoint to the next and is a little worse than it should be."),
    hints=(
        "Evaluate the same weights twice on the same data: should the two results ever differ?",
        "Something random still runs when the model is in evaluation mode. Which layers does `model.eval()` reach?",
        "`F.dropout` does not know the module's mode: its `training` argument defaults to True.",
    ),
    why=("`model.eval()` only flips the `training` flag of submodules. `torch.nn.functional.dropout(h, p)` is a plain "
         "function with `training=True` by default, so it keeps dropping activations (and rescaling the rest) during "
         "validation and inference: evaluation is noisy and biased."),
    fix=("Use a module (`self.drop = nn.Dropout(p)`, then `self.drop(h)`), or pass the mode: "
         "`F.dropout(h, p, training=self.training)`."),
    probes=("eval-mode",),
    follow_up=(
        "Why does `nn.Dropout` behave differently in `eval()` while `F.dropout` does not?",
        "How would you test that a model's evaluation is deterministic?",
        "What does dropout do to the activations it keeps, and why does that matter at test time?",
    ),
    operator=DropoutToFunctional(),
)
