"""Disguise: make a script look unlike the published reference without changing what it does.

Four kinds of change, all libcst rewrites and all seeded:

* scope-aware renaming of locals, parameters of the file's own functions (with
  the keyword arguments that pass them), helpers, classes and constants, to
  other natural names (``names.SYNONYMS``); attributes, methods, imports and
  anything of torch are never renamed;
* a new order for the module's function and class definitions, keeping every
  definition after whatever it needs at definition time (bases, decorators,
  default values);
* equivalent rewrites: ``import torch.nn as nn`` ↔ ``from torch import nn``,
  ``a, b = e, f`` as two lines when independent, ``m.eval()`` ↔ ``m.train(False)``;
* no comments or docstrings from the reference, and a new module docstring.
"""
from __future__ import annotations

import builtins
import keyword
import random

import libcst as cst
from libcst.metadata import ClassScope
from libcst.metadata.scope_provider import Assignment, ImportAssignment

from katas.engine.context import Context
from katas.engine.tree import find, method, names
from katas.interview.names import SYNONYMS


def disguise(source: str, seed: int, docstring: str) -> str:
    rng = random.Random(f"disguise:{seed}")
    module = cst.parse_module(source).visit(StripCommentsAndDocstrings())
    module = rename(Context.of(module.code), rng)
    module = reorder_definitions(module, rng)
    module = rewrite_equivalents(module, rng)
    return with_docstring(module, docstring).code


class StripCommentsAndDocstrings(cst.CSTTransformer):
    def leave_EmptyLine(self, original: cst.EmptyLine, updated: cst.EmptyLine):
        return cst.RemoveFromParent() if updated.comment else updated

    def leave_TrailingWhitespace(self, original, updated: cst.TrailingWhitespace):
        return updated.with_changes(comment=None, whitespace=cst.SimpleWhitespace("")) if updated.comment else updated

    def leave_Module(self, original, updated: cst.Module):
        return updated.with_changes(body=without_docstring(updated.body), header=[])

    def leave_IndentedBlock(self, original, updated: cst.IndentedBlock):
        body = without_docstring(updated.body)
        return updated.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])


def without_docstring(body):
    first = body[0] if body else None
    if isinstance(first, cst.SimpleStatementLine) and isinstance(first.body[0], cst.Expr) \
            and isinstance(first.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        rest = list(body[1:])
        if rest:
            rest[0] = rest[0].with_changes(leading_lines=[])
        return rest
    return body


def with_docstring(module: cst.Module, text: str) -> cst.Module:
    doc = cst.SimpleStatementLine([cst.Expr(cst.SimpleString(f'"""{text}"""'))])
    return module.with_changes(body=[doc, *module.body])


# -- renaming -------------------------------------------------------------------


def rename(ctx: Context, rng: random.Random) -> cst.Module:
    taken = {n.value for n in ctx.all(cst.Name)} | set(dir(builtins)) | set(keyword.kwlist)
    new_names: dict[cst.Name, str] = {}
    for binding in bindings(ctx):
        old = binding[0].name
        options = [n for n in SYNONYMS.get(old, ()) if n not in taken]
        if not options:
            continue
        new = rng.choice(options)
        taken.add(new)
        for assignment in binding:
            new_names[defined_name(assignment.node)] = new
            for access in assignment.references:
                if isinstance(access.node, cst.Name):
                    new_names[access.node] = new
            if isinstance(assignment.node, cst.Param):
                new_names.update({kw: new for kw in keyword_uses(ctx, assignment.node)})
    return ctx.module.visit(Renamer(new_names))


def bindings(ctx: Context) -> list[list[Assignment]]:
    """Renameable bindings, each as its assignments, in source order of first definition."""
    groups: dict[tuple[int, str], list[Assignment]] = {}
    fixed: set[tuple[int, str]] = set()  # a name with any binding that cannot be renamed keeps all of them
    for scope in {id(s): s for s in ctx.scopes()}.values():
        if isinstance(scope, ClassScope):  # class attributes and methods are reached as attributes
            continue
        for assignment in scope.assignments:
            key = (id(scope), assignment.name)
            if type(assignment) is not Assignment or isinstance(assignment, ImportAssignment) \
                    or assignment.name.startswith("__") or not renameable(ctx, assignment.node):
                fixed.add(key)
                continue
            groups.setdefault(key, []).append(assignment)
    groups = {key: group for key, group in groups.items() if key not in fixed}
    order = {node: i for i, node in enumerate(ctx.all(cst.Name))}
    return sorted(groups.values(), key=lambda g: min(order.get(defined_name(a.node), 0) for a in g))


def defined_name(node: cst.CSTNode) -> cst.Name:
    return node.name if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Param)) else node


def renameable(ctx: Context, node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Param):
        return isinstance(defined_name(node), cst.Name)
    function = ctx.enclosing(node, cst.FunctionDef)  # only parameters of the file's own top-level functions
    return function is not None and ctx.parents.get(function) is ctx.module and node.name.value not in ("self", "cls")


def keyword_uses(ctx: Context, param: cst.Param) -> list[cst.Name]:
    """``name=`` keywords in calls to the function that owns ``param``."""
    function = ctx.enclosing(param, cst.FunctionDef)
    calls = [c for c in ctx.all(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == function.name.value]
    return [a.keyword for c in calls for a in c.args if a.keyword is not None and a.keyword.value == param.name.value]


class Renamer(cst.CSTTransformer):
    def __init__(self, new_names: dict[cst.Name, str]):
        self.new_names = new_names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.new_names.get(original)
        return updated.with_changes(value=new) if new else updated


# -- reordering -----------------------------------------------------------------


def reorder_definitions(module: cst.Module, rng: random.Random) -> cst.Module:
    """Shuffle each run of consecutive top-level definitions, respecting definition-time dependencies."""
    body = list(module.body)
    i = 0
    while i < len(body):
        j = i
        while j < len(body) and isinstance(body[j], (cst.FunctionDef, cst.ClassDef)):
            j += 1
        if j - i > 1:
            body[i:j] = shuffled(body[i:j], rng)
        i = j + 1
    return module.with_changes(body=body)


def shuffled(defs: list, rng: random.Random) -> list:
    names_defined = {d.name.value for d in defs}
    needs = {d.name.value: {n.value for part in definition_time_parts(d) for n in names(part)} & names_defined - {d.name.value}
             for d in defs}
    by_name = {d.name.value: d for d in defs}
    order: list = []
    while needs:
        ready = sorted(n for n, deps in needs.items() if deps <= {d.name.value for d in order})
        pick = rng.choice(ready)
        order.append(by_name[pick])
        del needs[pick]
    spacing = [d.leading_lines for d in defs]  # each slot keeps its blank lines
    return [d.with_changes(leading_lines=lines) for d, lines in zip(order, spacing)]


def definition_time_parts(d: cst.CSTNode) -> list[cst.CSTNode]:
    """What Python evaluates when it runs the ``def``/``class`` statement itself."""
    parts = [dec.decorator for dec in d.decorators]
    if isinstance(d, cst.ClassDef):
        parts += [a.value for a in [*d.bases, *d.keywords]]
        parts += [s for s in d.body.body if not isinstance(s, cst.FunctionDef)]
        parts += [p for f in d.body.body if isinstance(f, cst.FunctionDef) for p in definition_time_parts(f)]
    else:
        params = d.params
        parts += [p.default for p in [*params.params, *params.kwonly_params, *params.posonly_params] if p.default]
    return parts


# -- equivalent rewrites --------------------------------------------------------


def rewrite_equivalents(module: cst.Module, rng: random.Random) -> cst.Module:
    return module.visit(EquivalentRewrites(rng))


class EquivalentRewrites(cst.CSTTransformer):
    def __init__(self, rng: random.Random):
        self.rng = rng

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        alias = updated.names[0]
        if len(updated.names) == 1 and alias.asname and cst.Module([]).code_for_node(alias.name) == "torch.nn" \
                and alias.asname.name.value == "nn" and self.rng.random() < 0.5:
            return cst.ImportFrom(module=cst.Name("torch"), names=[cst.ImportAlias(cst.Name("nn"))])
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        if method(updated) == "eval" and not updated.args and self.rng.random() < 0.5:
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("train")),
                                        args=[cst.Arg(cst.Name("False"))])
        return updated

    def leave_SimpleStatementLine(self, original, updated: cst.SimpleStatementLine):
        split = split_parallel_assignment(updated)
        if split and self.rng.random() < 0.7:
            return cst.FlattenSentinel(split)
        return updated


def split_parallel_assignment(line: cst.SimpleStatementLine) -> list[cst.SimpleStatementLine] | None:
    """``a, b = e, f`` as ``a = e`` then ``b = f``, when no later value reads an earlier target."""
    if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1:
        return None
    assign = line.body[0]
    target, value = assign.targets[0].target, assign.value
    if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)) or len(target.elements) != len(value.elements):
        return None
    targets = [e.value for e in target.elements]
    values = [e.value for e in value.elements]
    if not all(isinstance(t, cst.Name) for t in targets) or any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    for k, v in enumerate(values):
        if {n.value for n in find(v, cst.Name)} & {t.value for t in targets[:k]}:
            return None
    lines = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(t)], v)]) for t, v in zip(targets, values)]
    lines[0] = lines[0].with_changes(leading_lines=line.leading_lines)
    return lines
