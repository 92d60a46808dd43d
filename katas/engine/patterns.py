"""Structural patterns several operators look for."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from katas.engine.context import LOOPS, Context, Role
from katas.engine.tree import method

# What switches autograd off for a block or a decorated function.
NO_GRAD = {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad", "torch.inference_mode",
           "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode"}

BLOCKS = (cst.IndentedBlock, cst.Module)
ENDS_BLOCK = (cst.Return, cst.Raise, cst.Break, cst.Continue)
TENSOR_DATASET = "torch.utils.data.TensorDataset"
CONSTANT_TESTS = {"False": False, "None": False, "0": False, "TYPE_CHECKING": False, "typing.TYPE_CHECKING": False,
                  "True": True, "1": True, "__debug__": True}
WRAPPERS = {"enumerate", "tqdm", "iter"}  # calls that iterate the loader they are given


def loader_of(ctx: Context, iterable: cst.BaseExpression) -> cst.BaseExpression | None:
    """The DataLoader a loop iterates: ``loader``, ``enumerate(loader)``, ``tqdm(loader, ...)``."""
    while isinstance(iterable, cst.Call) and iterable.args and ctx.code(iterable.func).rsplit(".", 1)[-1] in WRAPPERS:
        iterable = iterable.args[0].value
    return iterable if isinstance(iterable, (cst.Name, cst.Attribute)) else None


def bound_arguments(call: cst.Call, function: cst.FunctionDef, offset: int = 0) -> list[tuple[cst.Param, cst.Arg]]:
    """``(parameter, argument)`` for each argument of ``call`` that binds a parameter of ``function``, whose first
    ``offset`` parameters the call fills itself (``self``): positional by position, keywords by name."""
    params = function.params
    positional = [*params.posonly_params, *params.params][offset:]
    found = []
    for i, arg in enumerate(call.args):
        if arg.keyword is not None:
            param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == arg.keyword.value), None)
        else:
            param = positional[i] if i < len(positional) and not arg.star else None
        if param is not None:
            found.append((param, arg))
    return found


def call_statement(statement: cst.CSTNode) -> cst.Call | None:
    """The call, when ``statement`` is a line holding exactly one call: ``x.f(...)``."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr):
        value = statement.body[0].value
        return value if isinstance(value, cst.Call) else None
    return None


def data_pair(ctx: Context, value: cst.BaseExpression | None) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(inputs, targets) that a ``return`` gives as a data set: ``return x, y`` or ``return TensorDataset(x, y)``."""
    if isinstance(value, cst.Tuple) and len(value.elements) == 2 \
            and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        return value.elements[0].value, value.elements[1].value
    if isinstance(value, cst.Call) and ctx.is_call_to(value, TENSOR_DATASET) and len(value.args) == 2 \
            and all(a.keyword is None and not a.star for a in value.args):
        return value.args[0].value, value.args[1].value
    return None


def method_statements(ctx: Context, root: cst.CSTNode, methods: set[str], roles: set[str]) -> list[tuple[cst.CSTNode, Role]]:
    """Lines under ``root`` that are just ``x.method(...)`` with ``x`` of one of ``roles``."""
    found = []
    for call in ctx.calls(root):
        if method(call) in methods:
            statement = ctx.statement(call)
            role = ctx.role(call.func.value)
            if call_statement(statement) is call and role.kind in roles:
                found.append((statement, role))
    return found


def innermost_training_loops(ctx: Context, through_calls: bool = True) -> list[cst.For | cst.While]:
    """Training loops that run no other training loop: none inside them, nor (``through_calls``) in a function
    their body calls, transitively; without ``through_calls``, only loops whose body calls ``backward()``
    itself, and nesting as written."""
    if not through_calls:
        loops = [loop for loop in ctx.all(*LOOPS) if ctx.calls(loop.body, "backward")]
        return [loop for loop in loops if not any(other is not loop and loop in set(ctx.ancestors(other)) for other in loops)]
    loops = ctx.training_loops()
    innermost = []
    for loop in loops:
        reached = {loop.body, *(f.body for c in ctx.runs(loop.body) for f in ctx.callees(c))}
        if not any(other is not loop and any(a in reached for a in ctx.ancestors(other)) for other in loops):
            innermost.append(loop)
    return innermost


def body_statement(ctx: Context, node: cst.CSTNode, block: cst.IndentedBlock) -> cst.CSTNode:
    """The statement directly in ``block`` that contains ``node``."""
    for a in [node, *ctx.ancestors(node)]:
        if ctx.parents.get(a) is block:
            return a
    raise ValueError("node is not inside block")


def loop_label(ctx: Context, loop: cst.For | cst.While) -> str:
    if isinstance(loop, cst.While):
        return f"while {ctx.code(loop.test)}"
    return f"for {ctx.code(loop.target)} in {ctx.code(loop.iter)}"


def later_siblings(ctx: Context, statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements after ``statement`` in its block (none when it is not directly in a block)."""
    block = ctx.parents.get(statement)
    if not isinstance(block, BLOCKS):
        return []
    body = list(block.body)
    return body[body.index(statement) + 1:]


def runs_after(ctx: Context, statement: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Statements that run after ``statement`` in the same pass of its loop or call: its later siblings, then
    those of each enclosing ``if``, ``with`` or ``try`` (never past a loop or a function)."""
    while True:
        yield from later_siblings(ctx, statement)
        owner = ctx.parents.get(ctx.parents.get(statement))
        if isinstance(owner, (cst.Else, cst.ExceptHandler, cst.Finally)):
            owner = ctx.parents.get(owner)
        while isinstance(owner, cst.If) and isinstance(ctx.parents.get(owner), cst.If):  # an elif
            owner = ctx.parents[owner]
        if not isinstance(owner, (cst.If, cst.With, cst.Try)):
            return
        statement = owner


def constant(ctx: Context, test: cst.BaseExpression) -> bool | None:
    """The truth of a test that is the same on every run (``False``, ``not __debug__`` ...), else None."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        value = constant(ctx, test.expression)
        return None if value is None else not value
    return CONSTANT_TESTS.get(ctx.code(test)) if isinstance(test, (cst.Name, cst.Attribute, cst.Integer)) else None


def unreachable(ctx: Context, node: cst.CSTNode) -> bool:
    """Whether ``node`` never runs: under a test that is always false, or after a ``return``, ``raise``,
    ``break`` or ``continue`` that always runs first in its block."""
    child = node
    for a in ctx.ancestors(node):
        if isinstance(a, BLOCKS) and child in a.body:
            earlier = list(a.body)[:list(a.body).index(child)]
            if any(isinstance(s, cst.SimpleStatementLine) and any(isinstance(x, ENDS_BLOCK) for x in s.body)
                   for s in earlier):
                return True
        elif isinstance(a, (cst.If, cst.While)) and child is a.body and constant(ctx, a.test) is False:
            return True
        elif isinstance(a, cst.If) and child is a.orelse and constant(ctx, a.test) is True:
            return True
        child = a
    return False


def runs_within(ctx: Context, node: cst.CSTNode, inside: Callable[[cst.CSTNode], bool],
                seen: frozenset = frozenset()) -> bool:
    """Whether ``node`` has an ancestor that is ``inside``, directly or through a function or method of this
    file called from within one (as ``Context.callees`` resolves calls: ``f()``, ``self.f()``,
    ``optimizer.step(f)`` ...), transitively."""
    for a in ctx.ancestors(node):
        if inside(a):
            return True
        if isinstance(a, cst.FunctionDef):
            if a in seen:
                return False
            return any(runs_within(ctx, c, inside, seen | {a}) for c in ctx.callers(a))
    return False


def runs_repeatedly(ctx: Context, node: cst.CSTNode) -> bool:
    """Whether ``node`` is inside a loop, or in a function of this file called from inside one."""
    return runs_within(ctx, node, lambda a: isinstance(a, LOOPS))


def in_training(ctx: Context, node: cst.CSTNode, loops: set) -> bool:
    """Whether ``node`` runs in one of the training ``loops``: inside one, in a function called (by name, in this
    file) from inside one, or in a training-step function (one that calls ``backward()``) that a loop runs."""

    def training(a: cst.CSTNode) -> bool:
        return a in loops or (isinstance(a, cst.FunctionDef) and bool(ctx.calls(a, "backward"))
                              and runs_repeatedly(ctx, a.body))

    return runs_within(ctx, node, training)


def steps_in(ctx: Context, node: cst.CSTNode) -> bool:
    """Whether the function around ``node`` runs a backward pass (directly or in what it calls): a learning step
    (``agent.learn()``) whose caller the file does not tell."""
    function = ctx.enclosing(node, cst.FunctionDef)
    return function is not None and any(method(c) == "backward" for c in ctx.runs(function.body))
