"""frozen: the model's first part is frozen by mistake, while the optimizer is still told to train it."""
from __future__ import annotations

import re

import libcst as cst

from katas.bugs.detach import DetachBranch, called_from_forward, looped_submodule_calls, module_classes, submodule_calls
from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, is_self_attribute

TORCH = "torch"
CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
# torch.nn layers without parameters: freezing one changes nothing
NO_PARAMETERS = re.compile(r"Dropout|Pool|Flatten|Identity|Upsampl|Shuffle|Softm[ai][xn]|Loss$|Fold$|Pad|Distance$|"
                           r"Similarity$|^(C|S|G|R|Leaky|Log|Hard|Soft|Tanh)?(ELU|ReLU6?|LU|[Ss]igmoid|Tanh|[Ss]hrink|"
                           r"[Ss]wish|[Ss]ign|[Pp]lus|Mish|Threshold|GLU|tanh|SiLU)$")
WITH_PARAMETERS = {"AdaptiveLogSoftmaxWithLoss", "LinearCrossEntropyLoss"}


def has_parameters(ctx: Context, call: cst.Call) -> bool:
    """Whether the module ``call`` builds holds parameters: a layer of the file's own, or a ``torch.nn`` one not
    known to have none (a container: when something in it has)."""
    for q in ctx.qualified_names(call.func):
        if q.startswith("torch.nn."):
            name = q.rsplit(".", 1)[-1]
            if name in CONTAINERS:
                return any(has_parameters(ctx, c) for c in find(call, cst.Call) if c is not call
                           and ctx.constructed(c) == MODEL)
            return name in WITH_PARAMETERS or not NO_PARAMETERS.search(name)
    return True


def first_submodule(ctx: Context, init: cst.FunctionDef, forwards: list[cst.FunctionDef]) -> tuple[cst.Attribute, list]:
    """The target of the first ``self.name = <a layer with parameters>`` line of ``__init__`` whose output ``forward``
    passes on to another submodule (the model's first part, not all of it), with those calls."""
    for statement in init.body.body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        assign = statement.body[0]
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            continue
        target = assign.targets[0].target
        if not (is_self_attribute(target) and isinstance(assign.value, cst.Call)
                and ctx.constructed(assign.value) == MODEL and has_parameters(ctx, assign.value)):
            continue
        feeding = []
        for function in forwards:
            calls = submodule_calls(function) + looped_submodule_calls(function)
            feeding += [c for c in submodule_calls(function) if c.func.attr.value == target.attr.value
                        and DetachBranch.feeds_submodule(ctx, c, calls, function)]
        if feeding:
            return target, feeding
    return None, []


def torch_name(ctx: Context) -> str | None:
    """The name this script binds ``torch`` to (``import torch``), or None."""
    for name in ctx.all(cst.Name):
        if ctx.qualified_names(name) == {TORCH}:
            return name.value
    return None


def own_lines(ctx: Context, calls: list[cst.Call]) -> list[cst.SimpleStatementLine]:
    """The lines ``h = self.stem(...)`` among ``calls``, directly in their function's body."""
    found = []
    for call in calls:
        statement = ctx.statement(call)
        function = ctx.enclosing(call, cst.FunctionDef)
        if statement in function.body.body and len(statement.body) == 1 and isinstance(statement.body[0], cst.Assign) \
                and statement.body[0].value is call:
            found.append(statement)
    return found


class FreezeFirstPart(Operator):
    """In a model (an ``nn.Module`` subclass of the file), freeze the first submodule with parameters that
    ``__init__`` builds and whose output ``forward`` passes on to another submodule (a first part, never the whole
    model): ``self.stem.requires_grad_(False)`` at the end of ``__init__``; or, where forward runs it in a line of
    its own (``h = self.stem(x)``) and the script imports torch, wrap that line in ``with torch.no_grad():``. The
    optimizer, built from ``model.parameters()``, still holds the frozen part."""

    no_site = ("no model's __init__ builds a layer with parameters (self.stem = nn.Linear(...)) whose output its "
               "forward() passes on to another submodule")

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        torch = torch_name(ctx)
        for _, methods in module_classes(ctx):
            init = methods.get("__init__")
            if init is None:
                continue
            target, calls = first_submodule(ctx, init, called_from_forward(methods))
            if target is None:
                continue
            sites.append(Site(f"frozen:{ctx.where(target)}:{ctx.code(target)}.requires_grad_(False)", target))
            if torch is not None:
                sites += [Site(f"frozen:{ctx.where(s)}:{ctx.code(s)}", s) for s in own_lines(ctx, calls)]
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        if isinstance(site.node, cst.Attribute):  # the submodule built in __init__: freeze it at the end
            init = ctx.enclosing(site.node, cst.FunctionDef)
            frozen = cst.parse_statement(f"{ctx.code(site.node)}.requires_grad_(False)\n")
            return rewrite(ctx.module, {init.body: lambda body: body.with_changes(body=[*body.body, frozen])})
        statement = site.node
        wrapped = cst.With(items=[cst.WithItem(cst.parse_expression(f"{torch_name(ctx)}.no_grad()"))],
                           body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
                           leading_lines=statement.leading_lines)
        return rewrite(ctx.module, {statement: lambda _: wrapped})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.encoder(x))
""",
            after="""\
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)
        self.encoder.requires_grad_(False)

    def forward(self, x):
        return self.head(self.encoder(x))
"""), Example(
            before="""\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 32)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        h = self.stem(x)
        return self.head(torch.relu(h))
""",
            after="""\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 32)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        with torch.no_grad():
            h = self.stem(x)
        return self.head(torch.relu(h))
""")]


BUG = Bug(
    id="frozen",
    title="Part of the model is frozen by mistake",
    difficulty="medium",
    observe=("Training runs, the loss goes down and accuracy is decent, but it levels off early: the first layers' "
             "weights are exactly the same at the end of training as when the model was built."),
    hints=(
        "Compare every layer's weights before and after training. Which ones never moved?",
        "The optimizer holds those weights. Do they ever get a .grad after loss.backward()?",
        "Something switches autograd off for the first part of the model: look for requires_grad or no_grad.",
    ),
    why=("Parameters with `requires_grad=False`, or a module run under `torch.no_grad()`, are not recorded by autograd: "
         "backward computes no gradient for them, their `.grad` stays None and the optimizer skips them, although "
         "it was given `model.parameters()`. The first layers keep their random initial weights, and everything "
         "after them has to learn around random features."),
    fix=("Remove the `requires_grad_(False)` (or the `with torch.no_grad():` around the first layer). Freeze on purpose "
         "only pretrained layers, and then give the optimizer only the parameters that require grad."),
    probes=("gradient-flow",),
    follow_up=(
        "When is freezing layers the right thing to do, and what do you pass to the optimizer then?",
        "How do `requires_grad_(False)`, `torch.no_grad()` and `.detach()` differ in what they stop?",
        "Does an L2 penalty added to the loss make a frozen layer learn? What would it do to it?",
    ),
    operator=FreezeFirstPart(),
)
