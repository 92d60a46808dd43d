"""The operator interface, and the few tree edits operators are made of.

An operator finds *sites* (the places where its bug can be planted) from the
structure of a script and rewrites exactly one of them. Edits replace nodes by
identity, so everything outside the site keeps its formatting and comments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from katas.engine.context import Context
from katas.engine.tree import children


@dataclass(frozen=True)
class Site:
    """A place where the bug can be planted. ``id`` is descriptive and stable, never an ordinal."""

    id: str
    node: cst.CSTNode = field(compare=False, repr=False)
    guessed: bool = False  # found through a conventional name rather than by structure


@dataclass(frozen=True)
class Example:
    before: str
    after: str


class Operator:
    """Subclasses set ``no_site`` (why a script has no site) and implement ``sites`` and ``mutate``."""

    no_site: str = "it has no place for this bug"

    def sites(self, ctx: Context) -> list[Site]:
        raise NotImplementedError

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        raise NotImplementedError

    def examples(self) -> list[Example]:
        return []


# -- edits ---------------------------------------------------------------------


class _Rewrite(cst.CSTTransformer):
    def __init__(self, edits: dict[cst.CSTNode, Callable[[cst.CSTNode], object]], paths: set[cst.CSTNode]):
        self.edits, self.paths = edits, paths

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node in self.paths  # a subtree without an edit is kept as it is, unvisited

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):
        edit = self.edits.get(original)
        return edit(updated) if edit else updated


def _paths_to(node: cst.CSTNode, targets: dict, paths: set[cst.CSTNode]) -> bool:
    """Add to ``paths`` every node under ``node`` (itself included) whose subtree holds a target; say if it does."""
    found = node in targets
    for child in children(node):
        found = _paths_to(child, targets, paths) or found
    if found:
        paths.add(node)
    return found


def rewrite(module: cst.Module, edits: dict[cst.CSTNode, Callable[[cst.CSTNode], object]]) -> cst.Module:
    """Apply ``edits`` (original node → function of its updated copy) in one pass that only descends into the
    subtrees holding an edit."""
    paths: set[cst.CSTNode] = set()
    _paths_to(module, edits, paths)
    return module.visit(_Rewrite(edits, paths))


def remove_statements(ctx: Context, statements: list[cst.CSTNode]) -> cst.Module:
    """Delete whole statements, keeping the comments above each: they go to the next statement left in the
    block, or to the block's end. A block left empty gets ``pass``."""
    return rewrite(ctx.module, removal_edits(ctx, statements))


def removal_edits(ctx: Context, statements: list[cst.CSTNode], end_comments: bool = False) -> dict:
    """The ``rewrite`` edits that delete ``statements`` as ``remove_statements`` does, to combine with others;
    ``end_comments`` keeps their end-of-line comments too, as lines of their own."""
    doomed = set(statements)
    blocks = dict.fromkeys(ctx.parents[s] for s in statements)
    return {block: lambda b, block=block: _without(b, [s in doomed for s in block.body], end_comments)
            for block in blocks}


def _without(block: cst.IndentedBlock | cst.Module, doomed: list[bool],
             end_comments: bool = False) -> cst.IndentedBlock | cst.Module:
    """``block`` less the statements flagged in ``doomed`` (by position), their leading lines kept (and their
    end-of-line comments with ``end_comments``)."""
    body, carried = [], []
    for statement, remove in zip(block.body, doomed):
        if remove:
            carried += statement.leading_lines
            comment = getattr(getattr(statement, "trailing_whitespace", None), "comment", None)
            if end_comments and comment is not None:
                carried.append(cst.EmptyLine(comment=comment))
            continue
        body.append(statement.with_changes(leading_lines=[*carried, *statement.leading_lines]))
        carried = []
    if not body and isinstance(block, cst.IndentedBlock):
        return block.with_changes(body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)])
    return block.with_changes(body=body, footer=[*carried, *block.footer])


def move_statement_after(ctx: Context, statement: cst.CSTNode, anchor: cst.CSTNode,
                         guard: cst.BaseExpression | None = None) -> cst.Module:
    """Move ``statement`` to just after ``anchor`` (a statement in the same or an enclosing block); with a
    ``guard``, it goes there inside ``if guard:``."""
    moved = statement if guard is None else cst.If(test=guard, body=cst.IndentedBlock(body=[statement]))

    def place(updated: cst.CSTNode) -> cst.FlattenSentinel:
        return cst.FlattenSentinel([updated, moved])

    return rewrite(ctx.module, {statement: lambda s: cst.RemoveFromParent(), anchor: place})
