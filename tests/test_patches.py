"""Every change the checker makes to torch and Python goes through one registry, and undoing any of it is caught.

The registry is read from a real instrumentation (every probe's observer installed, as in a checked run, and as
in a rank of a distributed run, where ``torch.Generator`` is replaced too). For each patched attribute and each
global hook registry, a script trains correctly and then puts the original back (``torch.save =
torch.save.__wrapped__``, ``builtins.print = ...``, ``torch.Generator = ...``) or clears the hooks: the health
gate's "instrumentation intact" criterion must name it. No probe module assigns to torch or builtins itself.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, run

from checker.findings import FAIL
from checker.runner import Limits
from checker.verdict import judge

LIST_REGISTRY = textwrap.dedent("""
    import json, sys, tempfile
    from checker import harness
    harness.prepare()
    from checker.instrument import Instrumentation
    from checker.probes import PROBES
    from checker.session import Session
    session = Session(tempfile.mkdtemp())
    observers = [probe.Observer(session) for probe in PROBES]
    Instrumentation(session).install()
    def where(owner):
        if isinstance(owner, type):
            return owner.__module__ + ":" + owner.__qualname__
        return owner.__name__ + ":"
    patched = [[where(owner), name] for owner, name in session.patches.patched()]
    hooks = sorted({where(owner) + "|" + registry for owner, registry, _, _ in session.patches._hooks})
    json.dump({"patched": patched, "hooks": hooks}, sys.stdout)
""")

UNDO = textwrap.dedent("""
    import importlib
    import builtins  # noqa: F401

    import tiny


    def resolve(where):
        module, _, qualname = where.partition(":")
        owner = importlib.import_module(module)
        for part in filter(None, qualname.split(".")):
            owner = getattr(owner, part)
        return owner


    def undone(value):
        if isinstance(value, classmethod):
            return classmethod(getattr(value.__func__, "__wrapped__", value.__func__))
        if isinstance(value, property):
            return property(value.fget, value.fset)
        if isinstance(value, type):
            return value.__mro__[1]
        return getattr(value, "__wrapped__", None) or (lambda *args, **kwargs: value(*args, **kwargs))


    tiny.train(epochs=1)
    owner = resolve({where!r})
    {action}
    print("undone")
""")


def registry(ranked: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **({"RANK": "0", "WORLD_SIZE": "1"} if ranked else {}))
    done = subprocess.run([sys.executable, "-c", LIST_REGISTRY], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def entries() -> dict:
    plain, ranked = registry(False), registry(True)
    extra = [entry for entry in ranked["patched"] if entry not in plain["patched"]]
    return {"patched": plain["patched"], "ranked": extra, "hooks": plain["hooks"]}


def tamper_cases(entries: dict) -> list[tuple[str, str, str, bool]]:
    """(where, name, the undoing line, whether it runs as a rank) for every registry entry."""
    cases = [(where, name, f"setattr(owner, {name!r}, undone(vars(owner)[{name!r}] if isinstance(owner, type) else "
                            f"getattr(owner, {name!r})))", False) for where, name in entries["patched"]]
    cases += [(where, name, f"setattr(owner, {name!r}, undone(getattr(owner, {name!r})))", True)
              for where, name in entries["ranked"]]
    for hook in entries["hooks"]:
        where, registry_name = hook.split("|")
        cases.append((where, registry_name, f"getattr(owner, {registry_name!r}).clear()", False))
    return cases


def test_the_registry_holds_the_patches_the_probes_once_made_themselves(entries):
    names = {name for _, name in entries["patched"]} | {name for _, name in entries["ranked"]}
    assert {"save", "load_state_dict", "print", "add_param_group", "normal_", "from_pretrained", "backward",
            "__iter__", "clip_grad_norm_", "cross_entropy", "dropout"} <= names
    assert any(name == "Generator" for _, name in entries["ranked"])
    assert not any(name == "Generator" for _, name in entries["patched"])  # replaced only in a rank
    assert any(hook.endswith("_global_parameter_registration_hooks") for hook in entries["hooks"])


def test_a_script_that_undoes_any_registered_patch_or_hook_is_caught(entries, tmp_path):
    """One script per registry entry, all checked; each run must name what it undid, and nothing else fails."""
    (tmp_path / "tiny.py").write_bytes((ROOT / "tests" / "untrusted" / "tiny.py").read_bytes())
    cases = tamper_cases(entries)
    assert len(cases) >= 40
    missed = []
    from concurrent.futures import ThreadPoolExecutor

    from conftest import WORKERS, warm_server

    def checked(index_case):
        index, (where, name, action, ranked) = index_case
        path = tmp_path / f"undo_{index}.py"
        path.write_text(UNDO.format(where=where, action=action))
        limits = Limits(timeout=120)
        if ranked:  # a rank's instrumentation replaces torch.Generator: the cold path, with a rank's environment
            env = dict(os.environ, RANK="0", WORLD_SIZE="1")
            done = subprocess.run([sys.executable, "-m", "katas", "check", "--json", str(path)], capture_output=True,
                                  text=True, timeout=120, env=env, cwd=tmp_path)
            doc = json.loads(done.stdout)
            health = next(p for p in doc["probes"] if p["probe"] == "health")
            part = next(p for p in health["parts"] if p["probe"] == "health.instrumentation-intact")
            return where, name, part["status"], part["message"], doc["output_tail"]
        with warm_server() as server:
            report = judge(run(path, "cpu", limits, warm=server), str(path), "cpu", limits)
        health = next(f for f in report.findings if f.probe == "health") if report.findings else None
        part = next((p for p in health.parts if p.probe == "health.instrumentation-intact"), None) if health else None
        return where, name, part.status if part else report.problem, part.message if part else "", report.output

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for where, name, status, message, output in pool.map(checked, enumerate(cases)):
            if status != FAIL or name not in message or "undone" not in output:
                missed.append((where, name, status, message[:200]))
    assert not missed, missed


PATCHING = ("torch", "nn", "F", "builtins", "functional", "optim")


def assignments_to_torch(path) -> list[str]:
    """Lines of a probe module that assign to an attribute of torch or builtins, or call setattr on one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in PATCHING \
                    and not ast.unparse(target).startswith("torch.backends."):  # a precision flag a probe's own copy
                found.append(f"{path.name}:{node.lineno}")  # runs under, put back when it is done: not a patch
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            base = node.args[0]
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in PATCHING:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_probe_patches_torch_or_builtins_itself():
    probes = sorted((ROOT / "checker" / "probes").glob("*.py"))
    assert len(probes) > 30
    found = [line for path in probes for line in assignments_to_torch(path)]
    assert not found, found
