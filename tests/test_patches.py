"""Every change the checker makes to torch and Python goes through one registry, and undoing any of it is caught.

The registry is read from a real instrumentation (every probe's observer installed, as in a checked run, and as
in a rank of a distributed run, where ``torch.Generator`` is replaced too). For each patched attribute and each
global hook registry, a script trains correctly and then puts the original back (``torch.save =
torch.save.__wrapped__``, ``builtins.print = ...``, ``torch.Generator = ...``) or clears the hooks: the health
gate's "instrumentation intact" criterion must name it. No probe module assigns to torch or builtins itself.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
from conftest import ROOT

from checker.findings import FAIL


def where(owner) -> str:
    """``module:qualname`` of a patched owner (a module, or a class in it)."""
    if isinstance(owner, type):
        return f"{owner.__module__}:{owner.__qualname__}"
    return f"{owner.__name__}:"


def registry(ranked: bool) -> dict:
    """Every probe's observer and the instrumentation installed in this process, as in a checked run (as a rank:
    with a rank's environment), the registry read, and all of it undone again."""
    from checker import harness

    harness.prepare()
    from checker.instrument import Instrumentation
    from checker.probes import PROBES
    from checker.session import Session

    saved = {name: os.environ.get(name) for name in ("RANK", "WORLD_SIZE")}
    if ranked:
        os.environ.update(RANK="0", WORLD_SIZE="1")
    try:
        session = Session(tempfile.mkdtemp())
        observers = [probe.observer(session) for probe in PROBES]  # noqa: F841 - installed for their patches
        Instrumentation(session).install()
        listed = {"patched": [[where(owner), name] for owner, name in session.patches.patched()],
                  "hooks": sorted({f"{where(owner)}|{name}" for owner, name, _, _ in session.patches._hooks})}
        session.patches.undo()
        return listed
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@functools.lru_cache(maxsize=None)
def listing() -> str:
    plain, ranked = registry(False), registry(True)
    extra = [entry for entry in ranked["patched"] if entry not in plain["patched"]]
    return json.dumps({"patched": plain["patched"], "ranked": extra, "hooks": plain["hooks"]})


@pytest.fixture(scope="module")
def entries() -> dict:
    return json.loads(listing())


def test_the_registry_holds_the_patches_the_probes_once_made_themselves(entries):
    names = {name for _, name in entries["patched"]} | {name for _, name in entries["ranked"]}
    assert {"save", "load_state_dict", "print", "add_param_group", "normal_", "from_pretrained", "backward",
            "__iter__", "clip_grad_norm_", "cross_entropy", "dropout"} <= names
    assert any(name == "Generator" for _, name in entries["ranked"])
    assert not any(name == "Generator" for _, name in entries["patched"])  # replaced only in a rank
    assert any(hook.endswith("_global_parameter_registration_hooks") for hook in entries["hooks"])


UNDO_ALL = textwrap.dedent("""
    import importlib
    import sys

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
    done = 0
    for where, name, kind in {cases!r}:
        owner = resolve(where)
        if kind == "hook":
            getattr(owner, name).clear()
        elif isinstance(owner, type):
            setattr(owner, name, undone(vars(owner)[name]))
        else:
            setattr(owner, name, undone(getattr(owner, name)))
        done += 1
    sys.stdout.write(f"undone {{done}}\\n")
""")


@pytest.fixture(scope="module")
def tampered(entries, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """One correct run that undoes every registry entry once it has trained (and one as a rank, for the entries only
    a rank has): (status, message) of its "instrumentation intact" criterion, by the kind of run."""
    folder = tmp_path_factory.mktemp("tampered")
    (folder / "tiny.py").write_bytes((ROOT / "tests" / "untrusted" / "tiny.py").read_bytes())
    plain = [(where, name, "attribute") for where, name in entries["patched"]]
    plain += [(*hook.split("|"), "hook") for hook in entries["hooks"]]
    ranked = [(where, name, "attribute") for where, name in entries["ranked"]]
    found = {}
    for kind, cases in (("plain", plain), ("ranked", ranked)):
        path = folder / f"undo_{kind}.py"
        path.write_text(UNDO_ALL.format(cases=cases))
        env = dict(os.environ, **({"RANK": "0", "WORLD_SIZE": "1"} if kind == "ranked" else {}))
        done = subprocess.run([sys.executable, "-m", "katas", "check", "--json", str(path)], capture_output=True,
                              text=True, timeout=180, env=env, cwd=folder)
        doc = json.loads(done.stdout)
        assert f"undone {len(cases)}" in doc["output_tail"], doc["output_tail"][-2000:]
        health = next(p for p in doc["probes"] if p["probe"] == "health")
        part = next(p for p in health["parts"] if p["probe"] == "health.instrumentation-intact")
        found[kind] = (part["status"], part["message"])
    return found


def registry_entries() -> list[tuple[str, str, str]]:
    """The registry, read once at collection: each entry is a test of its own."""
    listed = json.loads(listing())
    cases = [("plain", owner, name) for owner, name in listed["patched"]]
    cases += [("plain", *hook.split("|")) for hook in listed["hooks"]]
    cases += [("ranked", owner, name) for owner, name in listed["ranked"]]
    return cases


@pytest.mark.parametrize(("kind", "where", "name"), registry_entries(), ids=lambda value: str(value))
def test_a_script_that_undoes_a_registered_patch_or_hook_is_caught(kind, where, name, tampered):
    status, message = tampered[kind]
    assert status == FAIL and f".{name}" in message, (where, name, message[:300])


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
