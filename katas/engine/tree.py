"""Small questions about libcst nodes (plain isinstance checks: libcst.matchers costs 0.2 s to import)."""
from __future__ import annotations

import inspect
import re
from typing import Callable, Iterator

import libcst as cst

# Each node's children, as an analysed module's one indexing pass met them: operators walk the same subtrees
# many times. Nodes are immutable, so an entry never goes stale; the cache is only bounded (nodes cannot be
# weakly referenced), and emptied when full.
_CHILDREN: dict[cst.CSTNode, list[cst.CSTNode]] = {}
_MOST = 250_000
_VISITED_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')
_FIELD_ORDER: dict[type, tuple[str, ...] | None] = {}


def _fields_in_visit_order(kind: type) -> tuple[str, ...] | None:
    """The fields of a node type that hold children, in the order libcst visits them (its own
    ``_visit_and_replace_children`` names them in that order), read once per type; None where its source
    cannot be read."""
    if kind not in _FIELD_ORDER:
        try:
            source = inspect.getsource(kind._visit_and_replace_children)
        except (OSError, TypeError):
            _FIELD_ORDER[kind] = None
        else:
            _FIELD_ORDER[kind] = tuple(dict.fromkeys(_VISITED_FIELD.findall(source)))
    return _FIELD_ORDER[kind]


def _direct_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What libcst's ``node.children`` gives, read from the fields instead of by running a visitor."""
    fields = _fields_in_visit_order(type(node))
    if fields is None:
        return list(node.children)
    found: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, cst.CSTNode))
    return found


def index(module: cst.Module, visit: Callable[[cst.CSTNode, cst.CSTNode | None], None]) -> None:
    """Call ``visit(node, parent)`` on every node of ``module`` in source order (libcst's visiting order, without
    its visitor machinery: a third of the time), remembering each node's children."""
    if len(_CHILDREN) > _MOST:
        _CHILDREN.clear()

    def descend(node: cst.CSTNode, parent: cst.CSTNode | None) -> None:
        visit(node, parent)
        kids = _CHILDREN[node] = _direct_children(node)
        for kid in kids:
            descend(kid, node)

    descend(module, None)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node``'s children, in source order."""
    known = _CHILDREN.get(node)
    return _direct_children(node) if known is None else known


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it, in source order."""
    yield node
    for child in children(node):
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
