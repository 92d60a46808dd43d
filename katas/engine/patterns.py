"""Structural patterns several operators look for."""
from __future__ import annotations

import libcst as cst

from katas.engine.context import Context, Role
from katas.engine.tree import method


def call_statement(statement: cst.CSTNode) -> cst.Call | None:
    """The call, when ``statement`` is a line holding exactly one call: ``x.f(...)``."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr):
        value = statement.body[0].value
        return value if isinstance(value, cst.Call) else None
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


def innermost_training_loops(ctx: Context) -> list[cst.For]:
    loops = ctx.training_loops()
    return [loop for loop in loops if not any(other is not loop and loop in set(ctx.ancestors(other)) for other in loops)]


def body_statement(ctx: Context, node: cst.CSTNode, block: cst.IndentedBlock) -> cst.CSTNode:
    """The statement directly in ``block`` that contains ``node``."""
    for a in [node, *ctx.ancestors(node)]:
        if ctx.parents.get(a) is block:
            return a
    raise ValueError("node is not inside block")


def loop_label(ctx: Context, loop: cst.For) -> str:
    return f"for {ctx.code(loop.target)} in {ctx.code(loop.iter)}"
