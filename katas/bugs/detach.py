"""detach: a ``.detach()`` cuts a branch of the model off from the gradient."""
from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, is_self_attribute, names, single_name_target


def submodule_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Calls ``self.something(...)`` under ``node``."""
    return [c for c in find(node, cst.Call) if is_self_attribute(c.func)]


def looped_submodule_calls(node: cst.CSTNode) -> list[cst.Call]:
    """Calls ``block(...)`` of a loop variable over a submodule container: ``for block in self.blocks:``."""
    found = []
    for loop in find(node, cst.For):
        if isinstance(loop.target, cst.Name) and is_self_attribute(loop.iter):
            found += [c for c in find(loop.body, cst.Call)
                      if isinstance(c.func, cst.Name) and c.func.value == loop.target.value]
    return found


def module_classes(ctx: Context) -> Iterator[tuple[cst.ClassDef, dict[str, cst.FunctionDef]]]:
    """Each ``nn.Module`` subclass of the file, with its methods by name."""
    for cls in ctx.all(cst.ClassDef):
        if ctx.is_module_class(cls.name.value):
            yield cls, {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}


def called_from_forward(methods: dict[str, cst.FunctionDef]) -> list[cst.FunctionDef]:
    """``forward`` and the methods of its class that it calls as ``self.name(...)``, directly or not."""
    found = [methods["forward"]] if "forward" in methods else []
    for function in found:  # grows while it is read
        for call in submodule_calls(function):
            callee = methods.get(call.func.attr.value)
            if callee is not None and callee not in found:
                found.append(callee)
    return found


def picked(ctx: Context, call: cst.Call) -> cst.BaseExpression:
    """What to detach: the call, or the element taken from it when the submodule returns a tuple
    (``self.attn(q, k, v)[0]``): a tuple has no ``.detach()``."""
    parent = ctx.parents.get(call)
    return parent if isinstance(parent, cst.Subscript) and parent.value is call else call


def unpacked_output(statement: cst.CSTNode) -> str | None:
    """``out`` for a line ``out, state = self.rnn(x)`` (a recurrent layer's output sequence, then its state), else
    None."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        assign = statement.body[0]
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1 \
                and isinstance(assign.targets[0].target, cst.Tuple) and assign.targets[0].target.elements:
            first = assign.targets[0].target.elements[0].value
            return first.value if isinstance(first, cst.Name) else None
    return None


def unpacked_site(ctx: Context, call: cst.Call) -> cst.SimpleStatementLine | None:
    """The line ``out, state = <call>`` when ``call`` is its whole value."""
    statement = ctx.statement(call)
    return statement if unpacked_output(statement) and statement.body[0].value is call else None


def calls_tied(call: cst.Call, tied: set[str]) -> bool:
    return isinstance(call.func, cst.Attribute) and is_self_attribute(call.func) and call.func.attr.value in tied


def tied_submodules(cls: cst.ClassDef) -> set[str]:
    """Names ``A`` and ``B`` of every ``self.A.weight = self.B.weight`` (weight tying) in the class."""
    tied = set()
    for assign in find(cls, cst.Assign):
        sides = [t.target for t in assign.targets] + [assign.value]
        owners = [side.value.attr.value for side in sides if isinstance(side, cst.Attribute)
                  and isinstance(side.value, cst.Attribute) and is_self_attribute(side.value)]
        if len(owners) == len(sides) == 2:
            tied.update(owners)
    return tied


class DetachBranch(Operator):
    """In a module's ``forward`` (or a method of the module it calls), detach the output of a submodule that
    feeds another submodule (unpacked from a tuple, ``out, state = self.rnn(x)``: ``out``, on the next line).

    Not the output of a submodule whose weight is tied to another's (``self.head.weight = self.emb.weight``): the
    shared matrix still learns through its other use, so no layer keeps its initial weights, which is what this
    bug shows (and what gradient-flow, charting parameters, sees); the cut there is another lesson."""

    no_site = "no model's forward() passes one submodule's output on to another"

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for cls, methods in module_classes(ctx):
            tied = tied_submodules(cls)
            for function in called_from_forward(methods):
                calls = [c for c in submodule_calls(function) if c.func.attr.value not in methods]
                calls += looped_submodule_calls(function)
                sites += [Site(f"detach:{ctx.where(c)}:{ctx.code(c)}", unpacked_site(ctx, c) or picked(ctx, c))
                          for c in calls if self.feeds_submodule(ctx, c, calls, function) and not calls_tied(c, tied)]
        return sites

    @staticmethod
    def feeds_submodule(ctx: Context, call: cst.Call, calls: list[cst.Call], function: cst.FunctionDef) -> bool:
        """Whether ``call``'s output reaches another submodule call, directly or through a local name (from inside
        a loop over blocks: a call after the loop)."""
        if any(a in calls for a in ctx.ancestors(call)):
            return True
        statement = ctx.statement(call)
        name = single_name_target(statement) or unpacked_output(statement)
        if name is None:
            return False
        body = list(function.body.body)
        top = next((a for a in ctx.ancestors(statement) if a in body), statement)
        later = body[body.index(top) + 1:] if top in body else []
        return any(names(c, name) for s in later for c in find(s, cst.Call) if c in calls)

    def mutate(self, ctx: Context, site: Site):
        if isinstance(site.node, cst.SimpleStatementLine):  # out, state = self.rnn(x): detach out on the next line
            name = unpacked_output(site.node)
            block = ctx.parents[site.node]
            index = list(block.body).index(site.node) + 1
            cut = cst.parse_statement(f"{name} = {name}.detach()\n")
            return rewrite(ctx.module, {block: lambda b: b.with_changes(body=[*b.body[:index], cut, *b.body[index:]])})
        return rewrite(ctx.module, {site.node: lambda call: cst.Call(func=cst.Attribute(value=call, attr=cst.Name("detach")))})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        features = self.encoder(x)
        return self.head(features)
""",
            after="""\
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        features = self.encoder(x).detach()
        return self.head(features)
""")]


BUG = Bug(
    id="detach",
    title="A detach cuts a branch off the gradient",
    difficulty="medium",
    observe=("Training runs and the loss goes down, but part of the network never learns: some layers' "
             "weights are exactly the same at the end of training as at the start."),
    hints=(
        "Do all layers change during training? Compare a few weights before and after an epoch.",
        "Follow the gradient backwards from the loss through forward(): where does it stop?",
        "Something in forward() returns a tensor that shares data with its input but not its graph.",
    ),
    why=("`.detach()` returns a tensor cut from the autograd graph. Everything computed before the cut gets "
         "no gradient, so those parameters never change, even though the forward pass still uses them."),
    fix="Remove the `.detach()` (and do not replace it with `.data`, which cuts the graph the same way).",
    probes=("gradient-flow",),
    follow_up=(
        "When do you want a detach on purpose (target networks, stop-gradient, logging)?",
        "How do detach() and torch.no_grad() differ? Which shares storage with the original?",
        "How would you find which parameters get no gradient in a big model?",
    ),
    operator=DetachBranch(),
)
