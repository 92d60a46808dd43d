"""detach-alias: a target (or averaged) copy of the trained network shares the trained weights' storage.

Sites: ``copy.deepcopy(net)`` of a network an optimizer is built over, whose copy runs during training (it is called,
or handed to a call, in a training loop or a function that backpropagates) and is not frozen (its gradients switched
off: shared, that would freeze the trained network too), becomes ``copy.copy(net)``: a second
module object holding the very same parameter tensors. And a weight copied into another module's weights by hand,
``t.data = p.detach().clone()`` (``p.clone()``, ``p.data.clone()``) in a loop over ``.parameters()``, loses its
``.clone()``: ``t`` becomes a view of ``p``'s storage. Either way the "copy" is the trained network under another
name: it moves with every update, and a sync copies the weights onto themselves.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.no_shuffle import reads
from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import in_training, steps_in
from katas.engine.tree import find, is_self_attribute, method

DEEPCOPY = "copy.deepcopy"


def trained_keys(ctx: Context) -> set:
    """Bindings of the networks an optimizer is built over (``Adam(net.parameters())``, ``SGD(self.q.parameters())``)."""
    keys = set()
    for call in ctx.all(cst.Call):
        if ctx.constructed(call) == OPTIMIZER and call.args:
            for inner in find(call.args[0].value, cst.Call):
                if method(inner) in ("parameters", "named_parameters"):
                    held = inner.func.value
                    while True:  # ac.pi.parameters() trains part of ac: a copy of ac copies it
                        key = ctx.binding(held)
                        if key is not None:
                            keys.add(key)
                        if not isinstance(held, cst.Attribute) or is_self_attribute(held):
                            break
                        held = held.value
    return keys


def runs_in_training(ctx: Context, key, loops: set) -> bool:
    """Whether the value bound to ``key`` is called, or handed to a call, where training runs."""
    return any((ctx.binding(call.func) == key or any(ctx.binding(a.value) == key for a in call.args))
               and (in_training(ctx, call, loops) or steps_in(ctx, call)) for call in ctx.all(cst.Call))


def frozen(ctx: Context, key) -> bool:
    """Whether the script switches off gradients of the copy's weights (``t.requires_grad_(False)``, or
    ``p.requires_grad = False`` in a loop over ``t.parameters()``): shared with the trained network, that would
    freeze it too, and the planted script could not train at all."""
    for call in ctx.all(cst.Call):
        if method(call) == "requires_grad_" and ctx.binding(call.func.value) == key:
            return True
    for loop in ctx.all(cst.For):
        over = [c for c in find(loop.iter, cst.Call) if method(c) == "parameters" and ctx.binding(c.func.value) == key]
        if over and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                        for a in find(loop.body, cst.Assign) for t in a.targets):
            return True
    return False


def imported_from_copy(ctx: Context, func: cst.BaseExpression) -> cst.ImportFrom | None:
    """The ``from copy import deepcopy`` a bare ``deepcopy`` name comes from (not renamed, at module level), else
    None."""
    if not isinstance(func, cst.Name) or func.value != "deepcopy":
        return None
    return next((i for i in ctx.module.body for i in (i.body if isinstance(i, cst.SimpleStatementLine) else ())
                 if isinstance(i, cst.ImportFrom) and i.module is not None and ctx.code(i.module) == "copy"
                 and not isinstance(i.names, cst.ImportStar)
                 and any(ctx.code(a.name) == "deepcopy" and a.asname is None for a in i.names)), None)


def assigned_key(ctx: Context, call: cst.Call):
    """The binding ``call``'s value is assigned to (``target = copy.deepcopy(net)``), else None."""
    parent = ctx.parents.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return ctx.binding(parent.targets[0].target)
    return None


def cloned_weight(ctx: Context, assign: cst.Assign) -> cst.Call | None:
    """The ``.clone()`` call of ``t.data = p.detach().clone()`` (or ``p.clone()``, ``p.clone().detach()``) in a loop
    over parameters, else None."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Attribute) \
            or assign.targets[0].target.attr.value != "data":
        return None
    loop = ctx.enclosing(assign, cst.For)
    if loop is None or not any(method(c) in ("parameters", "named_parameters") for c in find(loop.iter, cst.Call)):
        return None
    clones = [c for c in find(assign.value, cst.Call) if method(c) == "clone" and not c.args]
    return clones[0] if len(clones) == 1 else None


class AliasTheCopy(Operator):
    """Make a copy of the trained network share its storage: ``copy.deepcopy`` → ``copy.copy``, or a weight copied
    by hand without ``.clone()``."""

    no_site = ("no copy of a trained network is made with copy.deepcopy(net) and run during training, nor are "
               "weights copied by hand with .clone()")

    def sites(self, ctx: Context) -> list[Site]:
        trained, loops = trained_keys(ctx), set(ctx.training_loops())
        found = []
        for call in ctx.all(cst.Call):
            if DEEPCOPY in ctx.qualified_names(call.func) and (isinstance(call.func, cst.Attribute)
                                                             or imported_from_copy(ctx, call.func) is not None) \
                    and len(call.args) == 1 and ctx.binding(call.args[0].value) in trained:
                key = assigned_key(ctx, call)
                if key is not None and runs_in_training(ctx, key, loops) and not frozen(ctx, key):
                    found.append(Site(f"detach-alias:{ctx.where(call)}:{ctx.code(call)}", call))
        for assign in ctx.all(cst.Assign):
            clone = cloned_weight(ctx, assign)
            if clone is not None and reads(ctx, assign.value):
                found.append(Site(f"detach-alias:{ctx.where(assign)}:{ctx.code(assign.targets[0].target)}", clone))
        return found

    def mutate(self, ctx: Context, site: Site):
        call = site.node
        if method(call) == "clone":
            return rewrite(ctx.module, {call: lambda c: c.func.value})
        if isinstance(call.func, cst.Attribute):
            return rewrite(ctx.module, {call.func: lambda f: f.with_changes(attr=cst.Name("copy"))})
        if any(ctx.code(a.name) == "copy" and a.asname is None for i in ctx.all(cst.Import) for a in i.names):
            return rewrite(ctx.module, {call.func: lambda f: cst.Attribute(value=cst.Name("copy"), attr=cst.Name("copy"))})
        edits = {call.func: lambda f: f.with_changes(value="copy")}  # deepcopy(net) -> copy(net), imported beside it
        statement = imported_from_copy(ctx, call.func)
        if not any(isinstance(a, cst.ImportAlias) and ctx.code(a.name) == "copy" and a.asname is None
                   for a in statement.names):
            edits[statement] = lambda s: s.with_changes(names=[cst.ImportAlias(name=cst.Name("copy"),
                                                                               comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                                               *s.names])
        return rewrite(ctx.module, edits)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import copy

import torch

online = QNet()
target = copy.deepcopy(online)
optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
for step, (s, a, r, s2) in enumerate(batches):
    loss = td_loss(online, target, s, a, r, s2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        target.load_state_dict(online.state_dict())
""",
            after="""\
import copy

import torch

online = QNet()
target = copy.copy(online)
optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
for step, (s, a, r, s2) in enumerate(batches):
    loss = td_loss(online, target, s, a, r, s2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        target.load_state_dict(online.state_dict())
"""), Example(
            before="""\
def hard_update(target, source):
    for t, p in zip(target.parameters(), source.parameters()):
        t.data = p.detach().clone()
""",
            after="""\
def hard_update(target, source):
    for t, p in zip(target.parameters(), source.parameters()):
        t.data = p.detach()
""")]


BUG = Bug(
    id="detach-alias",
    title="Target network shares the trained weights",
    difficulty="medium",
    observe=("On this small grid nothing looks wrong: the loss falls and the greedy policy's return climbs, as the "
             "correct script's does. Printed just before each update, the largest difference between the two "
             "networks' weights is 0 every time, and the periodic sync changes nothing."),
    hints=(
        "Compare the target network's weights with the online network's just before each update. Then compare "
        "where they live: `data_ptr()` of the first weight of each.",
        "What does a copy of a module copy? Which objects does the new module hold that the old one holds too?",
        "The target network was made so that it holds the online network's own weight tensors (a shallow copy, or "
        "a detach without a clone): it is the online network under another name, and moves with every update.",
    ),
    why=("`copy.copy(net)` makes a second module object whose parameter dictionary is the first one's: the same "
         "tensors. `p.detach()` is a view of `p`'s storage, not a copy: writing it into another module's `.data` "
         "makes that module's weight an alias. Either way the target network changes whenever the online one does; "
         "its TD targets move with every update (the deadly triad's bootstrapping without a fixed target), and the "
         "periodic sync copies the weights onto themselves."),
    fix=("Make the copy own its storage: `copy.deepcopy(net)`, `p.detach().clone()`, or build a fresh network and "
         "`load_state_dict(net.state_dict())` (which copies the values in)."),
    probes=("target-lag",),
    follow_up=(
        "What does `p.detach()` share with `p`, and what does `p.detach().clone()` not?",
        "Why is `load_state_dict(other.state_dict())` a copy even though `state_dict()` returns tensors that share "
        "storage with the parameters?",
        "How would you test, in one line, that two modules share no parameter storage?",
    ),
    operator=AliasTheCopy(),
)
