"""val-grad: validation runs with autograd on, building graphs that no backward pass uses."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import NO_GRAD, constant, innermost_training_loops, runs_within
from katas.engine.tree import find, method

LOOPING = (cst.For, cst.While, cst.CompFor)
SET_GRAD = {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"}


def grad_mode(ctx: Context, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The mode ``torch.set_grad_enabled(mode)`` is given, else None."""
    if isinstance(expr, cst.Call) and ctx.qualified_names(expr.func) & SET_GRAD:
        return next((a.value for a in expr.args if a.keyword is None and not a.star
                     or a.keyword is not None and a.keyword.value == "mode"), None)
    return None


def switches_off_grad(ctx: Context, expr: cst.BaseExpression) -> bool:
    """``torch.no_grad()`` or ``torch.inference_mode()`` (called or not, as decorators may be), or
    ``torch.set_grad_enabled(False)``."""
    target = expr.func if isinstance(expr, cst.Call) else expr
    mode = grad_mode(ctx, expr)
    return bool(ctx.qualified_names(target) & NO_GRAD) or mode is not None and constant(ctx, mode) is False


def switches_by_phase(ctx: Context, expr: cst.BaseExpression) -> bool:
    """``torch.set_grad_enabled(phase == "train")``: a mode that is not the same on every run and reads a value
    that also decides whether a backward pass runs (``if phase == "train": loss.backward()``), so the passes
    that skip the backward, the evaluation, run without autograd."""
    mode = grad_mode(ctx, expr)
    if mode is None or constant(ctx, mode) is not None:
        return False
    read = reads(ctx, mode)
    return bool(read) and any(
        reads(ctx, test.test) & read and any(method(c) == "backward" for branch in (test.body, test.orelse)
                                             if branch is not None for c in ctx.runs(branch))
        for test in ctx.all(cst.If))


def reads(ctx: Context, expr: cst.BaseExpression) -> set:
    """What ``expr`` reads: its variables (by binding, modules left out) and attributes (``self.x`` by binding,
    ``args.train`` as written)."""
    def module(name: cst.Name) -> bool:
        return any(isinstance(b, (cst.Import, cst.ImportFrom)) for b in ctx.bound_to(name))

    found: set = set()
    for node in find(expr, cst.Name, cst.Attribute):
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and not module(node.value):
                key = ctx.binding(node)
                found.add(key if key is not None and key[0] == "self" else ("attribute", ctx.code(node)))
        elif ctx.is_read(node) and not isinstance(ctx.parents.get(node), cst.Attribute) and not module(node):
            key = ctx.binding(node)
            if key is not None:
                found.add(key)
    return found


def grad_switch(ctx: Context, expr: cst.BaseExpression) -> bool:
    """What the operator removes: a switch that turns autograd off, always or in the evaluation passes."""
    return switches_off_grad(ctx, expr) or switches_by_phase(ctx, expr)


def evaluates(ctx: Context, root: cst.CSTNode, inner: set) -> bool:
    """Whether the code under ``root`` evaluates a model: it calls one, never calls ``backward()``, and is not part
    of every training step unless it loops over batches of its own (validation inside the training loop). A
    function that another function calls on its way to ``backward()`` is part of that step (a TD target's
    forward called from the update that backpropagates the loss it enters)."""
    calls = ctx.calls(root)
    if not any(ctx.role(c.func).kind == MODEL for c in calls) or any(method(c) == "backward" for c in calls):
        return False
    own = ctx.enclosing(root, cst.FunctionDef)

    def step(a: cst.CSTNode) -> bool:  # a teacher's or target network's forward, a GAN's fakes
        return a in inner or (isinstance(a, cst.FunctionDef) and a is not own
                              and any(method(c) == "backward" for c in ctx.calls(a)))

    return not runs_within(ctx, root, step) or bool(find(root, *LOOPING))


class RemoveNoGrad(Operator):
    """Remove the ``with torch.no_grad():`` (or ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``)
    around an evaluation, its body dedented, or the ``@torch.no_grad()`` decorator of an evaluation function; or
    the ``with torch.set_grad_enabled(phase == "train"):`` around a model that both trains and evaluates, so that
    its evaluation passes build graphs too."""

    no_site = "it never evaluates a model under torch.no_grad(), torch.inference_mode() or torch.set_grad_enabled()"

    def candidates(self, ctx: Context):
        inner = set(innermost_training_loops(ctx, through_calls=False))
        for node in ctx.all(cst.With):
            item = next((i for i in node.items if switches_off_grad(ctx, i.item)), None)
            if item is not None and evaluates(ctx, node.body, inner):
                yield node, f"with {ctx.code(item.item)}"
                continue
            item = next((i for i in node.items if switches_by_phase(ctx, i.item)), None)
            if item is not None and any(ctx.role(c.func).kind == MODEL for c in ctx.calls(node.body)):
                yield node, f"with {ctx.code(item.item)}"
        for function in ctx.all(cst.FunctionDef):
            decorator = next((d for d in function.decorators if switches_off_grad(ctx, d.decorator)), None)
            if decorator is not None and evaluates(ctx, function.body, inner):
                yield decorator, f"@{ctx.code(decorator.decorator)}"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"val-grad:{ctx.where(node)}:{label}", node) for node, label in self.candidates(ctx)]

    def mutate(self, ctx: Context, site: Site):
        if isinstance(site.node, cst.Decorator):
            return without_decorator(ctx, site.node)
        return without_with(ctx, site.node)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def validate(net: nn.Module, batches):
    net.eval()
    with torch.no_grad():
        return sum((net(x).argmax(1) == y).sum().item() for x, y in batches)
""",
            after="""\
import torch


def validate(net: nn.Module, batches):
    net.eval()
    return sum((net(x).argmax(1) == y).sum().item() for x, y in batches)
""")]


def without_with(ctx: Context, node: cst.With) -> cst.Module:
    """Drop the grad-switching items of ``node``; when it was the only one, put the body in its place (dedented),
    keeping the comments above the ``with`` and in its body; a comment beside the ``with`` line goes with it, as
    a removed line's does."""
    items = [i for i in node.items if not grad_switch(ctx, i.item)]
    if items:
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return rewrite(ctx.module, {node: lambda w: w.with_changes(items=items)})
    return body_in_place(ctx, node)


def body_in_place(ctx: Context, node: cst.With | cst.If) -> cst.Module:
    """Put ``node``'s body in its place, dedented, keeping the comments above ``node`` and in its body."""
    body = node.body
    if isinstance(body, cst.IndentedBlock):
        statements, footer = list(body.body), list(body.footer)
    else:  # with torch.no_grad(): x = f()
        statements = [cst.SimpleStatementLine(body=body.body, trailing_whitespace=body.trailing_whitespace)]
        footer = []
    statements[0] = statements[0].with_changes(leading_lines=[*node.leading_lines, *statements[0].leading_lines])
    block = ctx.parents[node]
    index = list(block.body).index(node)

    def edit(b: cst.IndentedBlock | cst.Module) -> cst.IndentedBlock | cst.Module:
        rest = list(b.body[index + 1:])
        if footer and rest:  # comments that closed the block go above the next statement
            rest[0] = rest[0].with_changes(leading_lines=[*footer, *rest[0].leading_lines])
        body = [*b.body[:index], *statements, *rest]
        return b.with_changes(body=body, footer=b.footer if rest else [*footer, *b.footer])

    return rewrite(ctx.module, {block: edit})


def without_decorator(ctx: Context, decorator: cst.Decorator) -> cst.Module:
    """Drop ``decorator`` from its function, keeping the comments above it (a comment beside it goes with it)."""
    function = ctx.parents[decorator]
    carried = list(decorator.leading_lines)

    def edit(f: cst.FunctionDef) -> cst.FunctionDef:
        decorators = list(f.decorators)
        index = list(function.decorators).index(decorator)
        decorators.pop(index)
        if index < len(decorators):
            decorators[index] = decorators[index].with_changes(
                leading_lines=[*carried, *decorators[index].leading_lines])
            return f.with_changes(decorators=decorators)
        return f.with_changes(decorators=decorators, lines_after_decorators=[*carried, *f.lines_after_decorators])

    return rewrite(ctx.module, {function: edit})


BUG = Bug(
    id="val-grad",
    title="Validation builds autograd graphs",
    difficulty="medium",
    observe=("Validation numbers are right, but validation is slower than it should be and memory peaks while it "
             "runs: a larger validation batch, which inference alone would fit, runs out of memory."),
    hints=(
        "Validation never calls backward(). What is PyTorch still preparing for, batch after batch?",
        "Check whether the validation outputs carry a `grad_fn`.",
        "Autograd is left switched on while the validation batches run.",
    ),
    why=("With grad mode on, every operation on tensors that require grad records a node in an autograd graph "
         "and saves the activations its backward would need. Validation never calls backward(), so all of that "
         "is built for nothing: slower forwards, and activation memory held until the outputs are dropped. "
         "Detaching the output afterwards does not help: the graph was already built."),
    fix=("Run validation under `with torch.no_grad():` or `with torch.inference_mode():`, or decorate the "
         "evaluation function with `@torch.no_grad()`. Keep `model.eval()` too: it is a different switch."),
    probes=("eval-no-grad",),
    follow_up=(
        "What is the difference between torch.no_grad() and torch.inference_mode()? When can you not use the latter?",
        "Does model.eval() turn off gradient tracking? What does it change?",
        "Why does `model(x).detach()` in validation not save the memory that `torch.no_grad()` saves?",
    ),
    operator=RemoveNoGrad(),
)
