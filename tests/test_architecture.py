"""The import graph of ``checker/`` and ``katas/`` has no circle, counting lazy imports inside functions.

An edge is an ``import`` or ``from ... import`` anywhere in a module's source, to the module of this
project it names: ``from checker.probes import health`` is an edge to ``checker.probes.health``, not to the
package (a submodule's import of its parent package is Python's own doing, not a choice of the code).
"""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGES = ("checker", "katas")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules ``name`` imports, directly or lazily."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
            named.update(submodules if len(submodules) == len(node.names) else [base, *submodules])

    def owner(module: str) -> str | None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        return module or None

    return {found for module in named if (found := owner(module)) not in (None, name)}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def test_the_import_graph_has_no_circle():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert not circles(graph), circles(graph)


def test_a_circle_is_found_when_there_is_one():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


PATCHED_MODULES = ("torch", "builtins", "os", "sys", "functools", "multiprocessing")
# numeric precision switches a probe sets for its own float32 comparison on a copy, and restores: a setting, not a
# replacement of anything the script calls
PRECISION_SWITCHES = ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32")


def patches_in(path: Path) -> list[str]:
    """Where a module assigns to an attribute of torch, builtins or the process's modules, or calls setattr or a
    patch registry: what only :mod:`checker.instrument` may do."""
    tree = ast.parse(path.read_text())
    bound = set()  # names the module binds to those modules (``import torch.nn as nn``, ``from torch import optim``)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                         if alias.name.split(".")[0] in PATCHED_MODULES)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PATCHED_MODULES:
            bound.update(alias.asname or alias.name for alias in node.names)

    def root(node: ast.AST) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and root(target) in bound and \
                    not ast.unparse(target).startswith(PRECISION_SWITCHES):
                found.append(f"{path.name}:{node.lineno} assigns {ast.unparse(target)}")
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if called == "setattr" or called.endswith(("patches.patch", "._patch")):
                found.append(f"{path.name}:{node.lineno} calls {called}")
    return found


def test_no_probe_patches_torch_or_builtins_itself():
    """Every patch goes through the instrumentation's registry, which the tamper check covers."""
    found = [place for path in sorted((ROOT / "checker" / "probes").rglob("*.py")) for place in patches_in(path)]
    assert not found, found


def test_a_patch_in_a_probe_would_be_found(tmp_path):
    probe = tmp_path / "sneaky.py"
    probe.write_text("import builtins\nimport torch.nn as nn\nfrom torch import optim\n\n"
                     "def install():\n    builtins.print = len\n    nn.Module.__call__ = None\n"
                     "    setattr(optim, 'SGD', None)\n    local = object()\n    local.x = 1\n")
    assert [p.split(" ", 1)[1] for p in patches_in(probe)] == [
        "assigns builtins.print", "assigns nn.Module.__call__", "calls setattr"]


def test_no_probe_imports_another_probe():
    """Probes share measurements through checker.probes._shared, never by importing one another."""
    import checker.probes

    known = modules()
    probes = {probe.module.__name__ for probe in checker.probes.PROBES}
    found = [(name, target) for name in sorted(probes) for target in imports(name, known[name], known)
             if target in probes]
    assert probes and not found, found


def session_writes_in(path: Path) -> list[str]:
    """Where a module assigns to an attribute of the session it observes (``session.x = ...``,
    ``self.session.x += ...``) or deletes one: only the timeline and the update ledger write the run's record."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            while isinstance(target, ast.Subscript):  # session.passes[0] = ...
                target = target.value
            if isinstance(target, ast.Attribute) and ast.unparse(target.value) in ("session", "self.session"):
                found.append(f"{path.name}:{node.lineno} writes {ast.unparse(target)}")
    return found


def test_probes_only_read_the_session():
    """Observers subscribe to events and read the timeline and the ledger; none writes them."""
    found = [place for path in sorted((ROOT / "checker" / "probes").rglob("*.py")) for place in session_writes_in(path)]
    assert not found, found


def test_a_write_to_the_session_would_be_found(tmp_path):
    probe = tmp_path / "meddling.py"
    probe.write_text("class Observer:\n    def __init__(self, session):\n        self.session = session\n"
                     "        session.current = None\n        self.session.updates += 1\n"
                     "        self.session.passes[0] = None\n        self.count = 0\n")
    assert [p.split(" ", 1)[1] for p in session_writes_in(probe)] == [
        "writes session.current", "writes self.session.updates", "writes self.session.passes"]
