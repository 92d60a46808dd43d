"""Small questions about libcst nodes (plain isinstance checks: libcst.matchers costs 0.2 s to import)."""
from __future__ import annotations

from typing import Iterator

import libcst as cst

# Each node's children, as an analysed module's one indexing pass met them: libcst's ``children`` runs a
# visitor on every call, and operators walk the same subtrees many times. Nodes are immutable, so an entry
# never goes stale; the cache is only bounded (nodes cannot be weakly referenced), and emptied when full.
_CHILDREN: dict[cst.CSTNode, list[cst.CSTNode]] = {}
_MOST = 250_000


def remember(node: cst.CSTNode, parent: cst.CSTNode | None) -> None:
    """Note ``node`` under ``parent``; called in source order, once per node, by the indexing pass."""
    if parent is None and len(_CHILDREN) > _MOST:
        _CHILDREN.clear()
    _CHILDREN[node] = []
    if parent is not None:
        _CHILDREN[parent].append(node)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it, in source order."""
    yield node
    children = _CHILDREN.get(node)
    for child in node.children if children is None else children:
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
