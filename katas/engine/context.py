"""What the operators know about a script: its syntax tree, scopes, qualified names and the roles of values.

A *role* says what a value is at run time (``optimizer``, ``scheduler``, ``model``,
``loader``), found by structure, not by name: a value gets a role where it is
built (``torch.optim.AdamW(...)``, a subclass of ``nn.Module``, ``DataLoader(...)``)
and keeps it through assignments, ``self.x = ...`` attributes, ``.to(device)`` and
calls into functions of the same file (argument → parameter, positional or
keyword). Only when that finds nothing does a conventional name (``opt``,
``scheduler``, ``model`` ...) decide, and the answer says it was a guess.

*Calls* are resolved to the file's own functions and methods through the scopes, not by
name: ``f(...)`` to the ``def`` its name is bound to, ``self.m(...)`` to a method of the
enclosing class (its bases and subclasses in the file), ``trainer.fit()`` to a method of the
class ``trainer`` is built from, and a function passed as an argument
(``optimizer.step(closure)``) as called there. A loop *trains* when one pass of it runs
``backward()``: in its body, or in what its body calls.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider

from katas.engine.tree import find, index, is_self_attribute
from katas.engine.tree import method as method_of

OPTIMIZER, SCHEDULER, MODEL, LOADER = "optimizer", "scheduler", "model", "loader"
LOOPS = (cst.For, cst.While)
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


@dataclass
class Context:
    source: str
    module: cst.Module = field(init=False)
    parents: dict = field(default_factory=dict)
    index: dict[type, list[cst.CSTNode]] = field(default_factory=dict)
    functions: dict[str, cst.FunctionDef] = field(default_factory=dict)
    class_bases: dict[str, set[str]] = field(default_factory=dict)
    _scopes: Mapping = field(default_factory=dict)
    _qualified: dict = field(default_factory=dict)
    _bindings: dict = field(default_factory=dict)
    _own_calls: dict = field(default_factory=dict)
    _callees: dict = field(default_factory=dict)
    _callers: dict | None = None
    _order: dict = field(default_factory=dict)
    _training: list | None = None

    def __post_init__(self) -> None:
        wrapper = MetadataWrapper(cst.parse_module(self.source), unsafe_skip_copy=True)
        self.module = wrapper.module
        self._scopes = wrapper.resolve(ScopeProvider)
        index(self.module, self._note)
        for function in self.all(cst.FunctionDef):
            self.functions.setdefault(function.name.value, function)
        self.class_bases = {c.name.value: set().union(*(self.qualified_names(b.value) for b in c.bases))
                            for c in self.all(cst.ClassDef)}
        self._infer_roles()

    def _note(self, node: cst.CSTNode, parent: cst.CSTNode | None) -> None:
        """The indexing pass, once per node in source order: parent links, and every node by type."""
        self.parents[node] = parent
        self.index.setdefault(type(node), []).append(node)

    @classmethod
    def of(cls, source: str) -> "Context":
        """The analysis of ``source``, shared: a Context is only read once built, and building one costs a
        third of a second."""
        return _analysed(source)

    def scopes(self) -> list:
        """Every scope of the module (global, functions, classes, comprehensions)."""
        return list({id(s): s for s in self._scopes.values() if s is not None}.values())

    def all(self, *kinds: type) -> list:
        """Every node of the given types, in source order."""
        if len(kinds) == 1:
            return self.index.get(kinds[0], [])
        return [node for node in self.parents if isinstance(node, kinds)]  # parents are indexed in source order

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What libcst's QualifiedNameProvider would give, asked of the node's scope only when needed."""
        if node not in self._qualified:
            scope = self._scopes.get(node)
            self._qualified[node] = {q.name for q in scope.get_qualified_names_for(node)} if scope else set()
        return self._qualified[node]

    # -- tree helpers ---------------------------------------------------------
    def is_read(self, name: cst.Name) -> bool:
        """A read of a variable: not an attribute's, a keyword's, a parameter's or a definition's own name
        (``x.mean``, ``f(mean=...)``, ``def f(mean)``, ``def mean()``)."""
        parent = self.parents.get(name)
        return not (isinstance(parent, cst.Attribute) and parent.attr is name
                    or isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is name
                    or isinstance(parent, (cst.FunctionDef, cst.ClassDef)))

    def code(self, node: cst.CSTNode) -> str:
        """``node``'s code on one line; a statement's comments above and beside it left out."""
        if isinstance(node, cst.SimpleStatementLine):
            node = node.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())
        elif isinstance(node, cst.BaseCompoundStatement):
            node = node.with_changes(leading_lines=())
        return " ".join(self.module.code_for_node(node).split())

    def ancestors(self, node: cst.CSTNode):
        node = self.parents.get(node)
        while node is not None:
            yield node
            node = self.parents.get(node)

    def enclosing(self, node: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
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
        for call in self.all(cst.Call):
            if method is not None and method_of(call) != method:
                continue
            if root is self.module:
                found.append(call)
                continue
            for a in self.ancestors(call):
                if a is root:
                    found.append(call)
                    break
                if isinstance(a, cst.FunctionDef):
                    break
        return found

    def is_call_to(self, call: cst.Call, *qualified: str) -> bool:
        return bool(self.qualified_names(call.func) & set(qualified))

    def training_loops(self) -> list[cst.For | cst.While]:
        """``for`` and ``while`` loops one pass of which runs ``.backward()``: in the body, or in a function or
        method of this file the body calls (``train(epoch)``, ``self._run_batch(...)``,
        ``optimizer.step(closure)``), transitively."""
        if self._training is None:
            self._training = [loop for loop in self.all(*LOOPS)
                              if any(method_of(c) == "backward" for c in self.runs(loop.body))]
        return self._training

    # -- calls into the file's own functions ------------------------------------
    def runs(self, root: cst.CSTNode, stop: Callable[[cst.CSTNode], bool] | None = None) -> list[cst.Call]:
        """The calls one run of ``root`` makes: those under it (not in the functions it defines), then those in
        the file's functions and methods they call, transitively, each function once, in that order; with
        ``stop``, none under a node it accepts (below ``root``, or in a called function)."""
        found: list[cst.Call] = []
        seen: set = set()
        todo = [root]
        while todo:
            block = todo.pop(0)
            for call in self._calls_under(block):
                if stop is not None and any(stop(a) for a in self._between(call, block)):
                    continue
                found.append(call)
                for function in self.callees(call):
                    if function not in seen:
                        seen.add(function)
                        todo.append(function.body)
        return found

    def callees(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The file's own functions and methods ``call`` runs, in source order: what it calls (a ``def`` its
        name is bound to, a class's ``__init__``, ``self.m``, ``super().m``, ``x.m`` where ``x`` is built from a
        class of the file) and the functions it is given as arguments, which it calls back
        (``optimizer.step(closure)``, ``model.apply(init_weights)``)."""
        if call not in self._callees:
            found = self._called(call.func, constructs=True)
            for arg in call.args:
                found += self._called(arg.value, constructs=False)
            if not self._order:
                self._order.update((f, i) for i, f in enumerate(self.all(cst.FunctionDef)))
            self._callees[call] = sorted(dict.fromkeys(found), key=self._order.__getitem__)
        return self._callees[call]

    def callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls in this file that run ``function`` (as ``callees`` resolves them), in source order."""
        if self._callers is None:
            self._callers = {}
            for call in self.all(cst.Call):
                for callee in self.callees(call):
                    self._callers.setdefault(callee, []).append(call)
        return self._callers.get(function, [])

    def _calls_under(self, root: cst.CSTNode) -> list[cst.Call]:
        """``calls(root)``, from each function's own calls (those not in a function it defines)."""
        if not self._own_calls:
            for call in self.all(cst.Call):
                self._own_calls.setdefault(self.enclosing(call, cst.FunctionDef) or self.module, []).append(call)
        if root is self.module:
            return self._own_calls.get(root, [])
        owner = self.enclosing(root, cst.FunctionDef) or self.module
        return [call for call in self._own_calls.get(owner, []) if any(a is root for a in self.ancestors(call))]

    def _between(self, node: cst.CSTNode, root: cst.CSTNode):
        """The ancestors of ``node`` below ``root``."""
        for a in self.ancestors(node):
            if a is root:
                return
            yield a

    def bound_to(self, name: cst.Name) -> list[cst.CSTNode]:
        """The nodes a name's visible assignments are made by: a ``def``, a ``class``, or an assigned name."""
        scope = self._scopes.get(name)
        if scope is None:
            return []
        return [a.node for a in scope[name.value] if hasattr(a, "node")]

    def _called(self, expr: cst.BaseExpression, constructs: bool) -> list[cst.FunctionDef]:
        """The file's functions and methods that calling ``expr`` runs (``constructs``: a class's ``__init__``);
        a parameter stands for the function it defaults to."""
        if isinstance(expr, cst.Name):
            found = []
            for node in self.bound_to(expr):
                if isinstance(node, cst.FunctionDef):
                    found.append(node)
                elif constructs and isinstance(node, cst.ClassDef):
                    found += self._method(node, "__init__")
                elif isinstance(node, cst.Param) and node.default is not None:  # def run(step=train_step)
                    found += self._called(node.default, constructs)
            return found
        if not isinstance(expr, cst.Attribute):
            return []
        name, owner = expr.attr.value, expr.value
        if isinstance(owner, cst.Name) and owner.value == "self":
            cls = self.enclosing(expr, cst.ClassDef)
            if cls is None:
                return []
            return [*self._method(cls, name), *(f for sub in self._subclasses(cls) for f in self._own_method(sub, name))]
        if isinstance(owner, cst.Call) and isinstance(owner.func, cst.Name) and owner.func.value == "super":
            cls = self.enclosing(expr, cst.ClassDef)
            return [f for base in (self._bases(cls) if cls is not None else []) for f in self._method(base, name)][:1]
        return [f for cls in self._instance_of(owner) for f in self._method(cls, name)]

    def _instance_of(self, expr: cst.BaseExpression) -> list[cst.ClassDef]:
        """The classes of this file an expression holds an instance of: ``Trainer(...)``, or a name (or a
        ``self`` attribute) assigned one."""
        if isinstance(expr, cst.Call):
            return [c for c in (self.bound_to(expr.func) if isinstance(expr.func, cst.Name) else [])
                    if isinstance(c, cst.ClassDef)]
        values = []
        if isinstance(expr, cst.Name):
            for node in self.bound_to(expr):
                parent = self.parents.get(node)
                if isinstance(parent, cst.AssignTarget):
                    values.append(self.parents[parent].value)
                elif isinstance(parent, cst.AnnAssign) and parent.target is node and parent.value is not None:
                    values.append(parent.value)
        elif is_self_attribute(expr):
            key = self.binding(expr)
            values = [a.value for a in self.all(cst.Assign) if any(self.binding(t.target) == key for t in a.targets)]
        return list(dict.fromkeys(c for v in values if isinstance(v, cst.Call) for c in self._instance_of(v)))

    def _own_method(self, cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else []
        return [f for f in body if isinstance(f, cst.FunctionDef) and f.name.value == name][-1:]

    def _method(self, cls: cst.ClassDef, name: str, seen: frozenset = frozenset()) -> list[cst.FunctionDef]:
        """The method ``name`` of ``cls``: its own, else the first of its bases' in this file (depth first)."""
        if cls in seen:
            return []
        own = self._own_method(cls, name)
        if own:
            return own
        return next((found for base in self._bases(cls) if (found := self._method(base, name, seen | {cls}))), [])

    def _bases(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        return [c for b in cls.bases if isinstance(b.value, cst.Name) for c in self.bound_to(b.value)
                if isinstance(c, cst.ClassDef) and c is not cls]

    def _subclasses(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """The classes of this file derived from ``cls``, directly or not, in source order."""
        found = [cls]
        while more := [c for c in self.all(cst.ClassDef) if c not in found and any(b in found for b in self._bases(c))]:
            found += more
        return found[1:]

    # -- roles --------------------------------------------------------------
    def role(self, expr: cst.BaseExpression) -> Role:
        kind = self._role(expr)
        if kind:
            return Role(kind)
        name = expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""
        guess = next((k for k, pattern in NAME_GUESS.items() if name and pattern.search(name)), None)
        return Role(guess, guessed=guess is not None)

    def binding(self, expr: cst.BaseExpression):
        """What a name or a ``self`` attribute stands for (its scope's assignment, or its class's attribute):
        the key roles are propagated under; None for anything else."""
        if isinstance(expr, cst.Name):
            scope = self._scopes.get(expr)
            if scope is None:
                return None
            assignment = next(iter(scope[expr.value]), None)  # all of a name's assignments share one scope
            return (id(assignment.scope), expr.value) if assignment else None
        if is_self_attribute(expr):
            owner = self.enclosing(expr, cst.ClassDef)
            return ("self", owner.name.value if owner else None, expr.attr.value)
        return None

    def _role(self, expr: cst.BaseExpression) -> str | None:
        key = self.binding(expr)
        if key is not None:
            return self._bindings.get(key)
        if isinstance(expr, cst.Call):
            if method_of(expr) in KEEPS_ROLE:
                return self._role(expr.func.value)
            return self.constructed(expr)
        return None

    def constructed(self, call: cst.Call) -> str | None:
        for q in self.qualified_names(call.func):
            if q.startswith("torch.optim.lr_scheduler."):
                return SCHEDULER
            if q.startswith("torch.optim.") and q[len("torch.optim."):][:1].isupper():
                return OPTIMIZER
            if q.endswith("DataLoader"):
                return LOADER
            if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper() or self.is_module_class(q):
                return MODEL
        return None

    def is_module_class(self, name: str, seen: frozenset = frozenset()) -> bool:
        if name in seen or name not in self.class_bases:
            return False
        bases = self.class_bases[name]
        return bool(bases & MODULE_BASES) or any(self.is_module_class(b, seen | {name}) for b in bases)

    def _infer_roles(self) -> None:
        """Propagate roles through assignments and same-file calls until nothing changes."""
        assigns = [*self.all(cst.Assign), *self.all(cst.AnnAssign)]
        calls = [c for c in self.all(cst.Call) if isinstance(c.func, cst.Name) and c.func.value in self.functions]
        for _ in range(10):
            before = dict(self._bindings)
            for node in assigns:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if node.value is not None:
                    kind = self._role(node.value)
                    for target in targets:
                        if isinstance(target, (cst.Tuple, cst.List)):
                            for element, part in zip(target.elements, self._unpacked(node.value)):
                                self._bind(element.value, part)
                        else:
                            self._bind(target, kind)
            for call in calls:
                params = self.functions[call.func.value].params
                positional = [*params.posonly_params, *params.params]
                i = 0
                for arg in call.args:
                    if arg.keyword is not None:
                        param = next((p for p in [*positional, *params.kwonly_params]
                                      if p.name.value == arg.keyword.value), None)
                        if param is not None:
                            self._bind(param.name, self._role(arg.value))
                        continue
                    # ``*args`` of a tuple written out in this file passes its parts position by position
                    parts = self._unpacked(self._tuple_behind(arg.value)) if arg.star == "*" else []
                    for kind in parts or ([] if arg.star else [self._role(arg.value)]):
                        if i < len(positional):
                            self._bind(positional[i].name, kind)
                        i += 1
                    i += bool(arg.star) and not parts
            if self._bindings == before:
                return

    def _tuple_behind(self, name: cst.BaseExpression) -> cst.BaseExpression:
        """The tuple (or list) written out where ``name`` is assigned, if that is its only assignment; else ``name``."""
        key = self.binding(name)
        values = [a.value for a in self.all(cst.Assign) if key is not None
                  and any(self.binding(t.target) == key for t in a.targets)]
        return values[0] if len(values) == 1 and isinstance(values[0], (cst.Tuple, cst.List)) else name

    def _unpacked(self, value: cst.BaseExpression) -> list[str | None]:
        """Roles of the parts of a tuple: written out, or returned (as one tuple) by a function of this file."""
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in self.functions:
            function = self.functions[value.func.value]
            returns = [r.value for r in find(function, cst.Return)
                       if isinstance(r.value, cst.Tuple) and self.enclosing(r, cst.FunctionDef) is function]
            value = returns[0] if len(returns) == 1 else value
        if isinstance(value, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
            return [self._role(e.value) for e in value.elements]
        return []

    def _bind(self, target: cst.BaseExpression, kind: str | None) -> None:
        key = self.binding(target)
        if kind and key is not None:
            self._bindings.setdefault(key, kind)


@functools.lru_cache(maxsize=64)
def _analysed(source: str) -> Context:
    return Context(source)
