"""Small questions about libcst nodes (plain isinstance checks: libcst.matchers costs 0.2 s to import)."""
from __future__ import annotations

from typing import Iterator

import libcst as cst


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it, in source order."""
    yield node
    for child in node.children:
        yield from walk(child)


def find(node: cst.CSTNode, *kinds: type) -> list:
    return [n for n in walk(node) if isinstance(n, kinds)]


def names(node: cst.CSTNode, value: str | None = None) -> list[cst.Name]:
    return [n for n in find(node, cst.Name) if value is None or n.value == value]


def method(call: cst.CSTNode) -> str | None:
    """``m`` for a call ``x.m(...)``, else None."""
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def is_self_attribute(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def single_name_target(statement: cst.CSTNode) -> str | None:
    """``x`` for a line ``x = ...``, else None."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        assign = statement.body[0]
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
            return assign.targets[0].target.value
    return None
