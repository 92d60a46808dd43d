"""What the operators know about a script: its syntax tree, scopes, qualified names and the roles of values.

A *role* says what a value is at run time (``optimizer``, ``scheduler``, ``model``,
``loader``), found by structure, not by name: a value gets a role where it is
built (``torch.optim.AdamW(...)``, a subclass of ``nn.Module``, ``DataLoader(...)``)
and keeps it through assignments, ``self.x = ...`` attributes, ``.to(device)`` and
calls into functions of the same file (argument → parameter, positional or
keyword). Only when that finds nothing does a conventional name (``opt``,
``scheduler``, ``model`` ...) decide, and the answer says it was a guess.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, QualifiedNameProvider, ScopeProvider

OPTIMIZER, SCHEDULER, MODEL, LOADER = "optimizer", "scheduler", "model", "loader"
KEEPS_ROLE = {"to", "cuda", "cpu", "train", "float", "double", "half", "bfloat16"}
NAME_GUESS = {
    OPTIMIZER: re.compile(r"^(opt|optim|optimi[sz]er)\d*$|_opt(imi[sz]er)?$"),
    SCHEDULER: re.compile(r"sched|^lr_"),
    MODEL: re.compile(r"^(model|net|network|classifier)\d*$|_(model|net)$"),
    LOADER: re.compile(r"loader$|^dl$"),
}
MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module"}


@dataclass(frozen=True)
class Role:
    kind: str | None
    guessed: bool = False


class _Collector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, ScopeProvider, ParentNodeProvider)

    def __init__(self, ctx: "Context"):
        self.ctx = ctx

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ctx.parents[node] = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(node, cst.Name):
            self.ctx.scopes[node] = self.get_metadata(ScopeProvider, node, None)
        if isinstance(node, (cst.Call, cst.Decorator)):
            target = node.func if isinstance(node, cst.Call) else node.decorator
            self.ctx.qualified[node] = {q.name for q in self.get_metadata(QualifiedNameProvider, target, set())}
        if isinstance(node, cst.ClassDef):
            self.ctx.class_bases[node.name.value] = {
                q.name for base in node.bases for q in self.get_metadata(QualifiedNameProvider, base.value, set())}
        if isinstance(node, cst.FunctionDef):
            self.ctx.functions.setdefault(node.name.value, node)
        return True


@dataclass
class Context:
    source: str
    module: cst.Module = field(init=False)
    parents: dict = field(default_factory=dict)
    scopes: dict = field(default_factory=dict)
    qualified: dict = field(default_factory=dict)
    class_bases: dict[str, set[str]] = field(default_factory=dict)
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    _bindings: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        wrapper = MetadataWrapper(cst.parse_module(self.source))
        self.module = wrapper.module
        wrapper.visit(_Collector(self))
        self._infer_roles()

    # -- tree helpers ---------------------------------------------------------
    def code(self, node: cst.CSTNode) -> str:
        return " ".join(self.module.code_for_node(node).split())

    def ancestors(self, node: cst.CSTNode):
        node = self.parents.get(node)
        while node is not None:
            yield node
            node = self.parents.get(node)

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def where(self, node: cst.CSTNode) -> str:
        """Dotted name of the enclosing classes and functions: ``Classifier.forward``."""
        names = [a.name.value for a in self.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.ClassDef))]
        return ".".join(reversed(names)) or "<module>"

    def statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The statement (a line or a compound statement) that contains ``node``."""
        for a in [node, *self.ancestors(node)]:
            if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return a
        raise ValueError("node is not inside a statement")

    def calls(self, root: cst.CSTNode, method: str | None = None) -> list[cst.Call]:
        """Calls under ``root``, optionally only ``x.method(...)``; below a statement, not in nested functions."""
        found = []
        whole_module = isinstance(root, cst.Module)

        class Finder(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return whole_module or node is root

            def visit_Call(self, node: cst.Call) -> None:
                if method is None or m.matches(node.func, m.Attribute(attr=m.Name(method))):
                    found.append(node)

        root.visit(Finder())
        return found

    def is_call_to(self, call: cst.Call, *qualified: str) -> bool:
        return any(q in qualified for q in self.qualified.get(call, ()))

    def training_loops(self) -> list[cst.For]:
        """``for`` loops whose body calls ``.backward()``."""
        return [loop for loop in m.findall(self.module, m.For()) if self.calls(loop.body, "backward")]

    # -- roles --------------------------------------------------------------
    def role(self, expr: cst.BaseExpression) -> Role:
        kind = self._role(expr)
        if kind:
            return Role(kind)
        name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
        guess = next((k for k, pattern in NAME_GUESS.items() if name and pattern.search(name)), None)
        return Role(guess, guessed=guess is not None)

    def _key(self, expr: cst.BaseExpression):
        if isinstance(expr, cst.Name):
            scope = self.scopes.get(expr)
            if scope is None:
                return None
            assignments = sorted(scope[expr.value], key=lambda a: str(type(a.scope)))
            return (id(assignments[0].scope), expr.value) if assignments else None
        if m.matches(expr, m.Attribute(value=m.Name("self"))):
            owner = self.enclosing(expr, cst.ClassDef)
            return ("self", owner.name.value if owner else None, expr.attr.value)
        return None

    def _role(self, expr: cst.BaseExpression) -> str | None:
        key = self._key(expr)
        if key is not None:
            return self._bindings.get(key)
        if isinstance(expr, cst.Call):
            if m.matches(expr.func, m.Attribute(attr=m.Name())) and expr.func.attr.value in KEEPS_ROLE:
                return self._role(expr.func.value)
            return self._constructed(expr)
        return None

    def _constructed(self, call: cst.Call) -> str | None:
        for q in self.qualified.get(call, ()):
            if q.startswith("torch.optim.lr_scheduler."):
                return SCHEDULER
            if q.startswith("torch.optim.") and q[len("torch.optim."):][:1].isupper():
                return OPTIMIZER
            if q.endswith("DataLoader"):
                return LOADER
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper() or self._is_module_class(q):
                return MODEL
        return None

    def _is_module_class(self, name: str, seen: frozenset = frozenset()) -> bool:
        if name in seen or name not in self.class_bases:
            return False
        bases = self.class_bases[name]
        return bool(bases & MODULE_BASES) or any(self._is_module_class(b, seen | {name}) for b in bases)

    def _infer_roles(self) -> None:
        """Propagate roles through assignments and same-file calls until nothing changes."""
        assigns = [n for n in m.findall(self.module, m.Assign() | m.AnnAssign())]
        calls = [c for c in self.qualified if isinstance(c, cst.Call) and m.matches(c.func, m.Name())
                 and c.func.value in self.functions]
        for _ in range(10):
            before = dict(self._bindings)
            for node in assigns:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if node.value is not None:
                    kind = self._role(node.value)
                    for target in targets:
                        self._bind(target, kind)
            for call in calls:
                params = self.functions[call.func.value].params
                positional = [*params.posonly_params, *params.params]
                for i, arg in enumerate(call.args):
                    if arg.keyword is not None:
                        param = next((p for p in [*positional, *params.kwonly_params]
                                      if p.name.value == arg.keyword.value), None)
                    else:
                        param = positional[i] if i < len(positional) and not arg.star else None
                    if param is not None:
                        self._bind(param.name, self._role(arg.value))
            if self._bindings == before:
                return

    def _bind(self, target: cst.BaseExpression, kind: str | None) -> None:
        key = self._key(target)
        if kind and key is not None:
            self._bindings.setdefault(key, kind)
