"""What several commands share: errors, reference scripts, and running a script under observation."""
from __future__ import annotations

import difflib
import importlib
import sys
import threading
from pathlib import Path

import click

from katas.errors import KataError

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "references"  # package data; `reference/` in the repository
DEFAULT_REFERENCE = "classifier"  # the canonical loop; every bug but log0 applies to it

EXIT_CODES = """\b
Exit codes:
  0    no symptom: every check passed, gave advice, or could not tell
  1    a symptom is present (or a check failed to observe)
  2    usage error (no such file, not a UTF-8 .py script, empty)
  3    the script did not run as a training script (syntax error, exception,
       crash, killed, out of memory, exited early, never trained)
  4    timed out (--timeout), or no progress for --idle seconds
  130  interrupted (Ctrl-C): the script and all it started were stopped"""


def run_options(command):
    """--device, --timeout, --idle and --memory: how a script is run under observation."""
    for option in reversed([
        click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
                     help="Where the script trains (passed to it as KATA_DEVICE)."),
        click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True, metavar="S",
                     help="Stop the script after S seconds in all."),
        click.option("--idle", type=click.FloatRange(min=1), default=30, show_default=True, metavar="S",
                     help="Stop the script after S seconds without progress (no training step, no output)."),
        click.option("--memory", type=click.FloatRange(min=64), metavar="MB",
                     help="Stop the script when its processes hold more than MB of memory "
                          "(default: 75% of RAM, at most 8192)."),
        click.option("--nproc", type=click.IntRange(min=1, max=64), metavar="N",
                     help="Run the script as N ranks of a distributed job, under PyTorch's own launcher "
                          "(torchrun --standalone --nproc-per-node N; gloo on CPU, nccl with --device cuda); "
                          "every rank is watched. Default: 1, or what the kata was made for."),
    ]):
        command = option(command)
    return command


def prefix_options(command):
    """--steps and --epochs: judge the first steps of a long training job, then stop it."""
    for option in reversed([
        click.option("--steps", type=click.IntRange(min=1), metavar="N",
                     help="Stop the script once it made N updates, where its next training step would begin, and "
                          "judge what ran (the run's evaluation in between still runs)."),
        click.option("--epochs", type=click.IntRange(min=1), metavar="E",
                     help="Stop the script where its training DataLoader would begin pass E+1, and judge what ran."),
    ]):
        command = option(command)
    return command


def run_plan(path: Path | None, args: tuple[str, ...], module: str | None, steps: int | None = None,
             epochs: int | None = None, profile: bool = False):
    """The file to check and how to run it (checker.plan.Plan): PATH with the script's own arguments, or a module
    of the current folder (``-m``) as ``python -m`` would run it."""
    from checker.plan import Plan

    if module:
        if path is not None:  # `kata check -m pkg.train -- --lr 3`: click took the first argument for PATH
            args = (str(path), *args)
        return module_file(module), Plan(tuple(args), module, str(Path.cwd()), steps, epochs, profile=profile)
    if path is None:
        raise click.UsageError("give the script to check (kata check train.py), or a module with -m")
    return path, Plan(tuple(args), steps=steps, epochs=epochs, imports=kata_imports(path), profile=profile)


def kata_imports(path: Path) -> str:
    """For a kata made from a script of your own (``kata new --from``), the folder of that script, whose modules
    the kata imports as it did; else ""."""
    from katas.workspace import read_metadata

    info = read_metadata(path)
    if info is None or not Path(info.reference).is_absolute():  # a bundled reference imports nothing of its own
        return ""
    return str(Path(info.reference).parent)


def module_file(name: str) -> Path:
    """The file ``python -m NAME`` runs from the current folder (a module, or a package's ``__main__``), found
    without importing it."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        raise click.UsageError(f"`{name}` is not a module name (dotted, like project.train)")
    base = Path.cwd().joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.is_file():
            return candidate
    raise click.UsageError(f"no module `{name}` in the current folder ({base}.py or {base}/__main__.py): run "
                           "kata check -m from the folder you would run python -m from")


def limits_of(timeout: float, idle: float, memory: float | None):
    from checker.runner import Limits, default_memory_mb

    return Limits(timeout, idle, memory or default_memory_mb())


def observe(path: Path, device: str, limits, warm=None, nproc: int = 1, expect=None, plan=None):
    """Check the file, then run it under observation (as ``nproc`` ranks when more than one). A file that cannot
    run gives a report that says why (``ran`` is False), so that every caller, ``--json`` included, can tell what
    happened. ``expect``: what a kata or a task's script must show beside a clean check (checker.expectation).
    ``plan``: the script's arguments, a module run, a prefix to judge (checker.plan)."""
    from checker.plan import Plan
    from checker.preflight import Unusable, preflight
    from checker.runner import run

    plan = plan or Plan()
    try:
        preflight(path)
    except Unusable as exc:
        from checker.verdict import unusable

        return unusable(str(path), device, str(exc), exc.detail, exc.exit_code)
    # The judges and the report's renderer load while the script runs, not before it starts.
    loading = threading.Thread(target=preload, args=("checker.verdict", "katas.render"), daemon=True)
    loading.start()
    result = run(path, device, limits, warm=warm, nproc=nproc, plan=plan)
    loading.join()
    from checker.verdict import judge

    return judge(result, str(path), device, limits, expect, plan)


def preload(*modules: str) -> None:
    for module in modules:
        importlib.import_module(module)


def ranks_for(path: Path, nproc: int | None) -> int:
    """How many ranks to run ``path`` as: ``--nproc`` when given, else what its kata or interview task was made
    for, else 1."""
    if nproc is not None:
        return nproc
    from katas.interview import marker
    from katas.workspace import read_metadata

    info = read_metadata(path)
    if info is not None:
        return info.nproc
    return marker.nproc(path) or 1


def refuse(report) -> None:
    """For a file that could not run: its error on stderr, and the exit code."""
    if report.detail:
        click.echo(report.detail, err=True)
    click.echo(f"Error: {report.problem}", err=True)
    sys.exit(report.exit_code)


def references() -> dict[str, Path]:
    """Reference scripts by name, the default first."""
    paths = sorted(REFERENCE_DIR.glob("*.py"), key=lambda p: (p.stem != DEFAULT_REFERENCE, p.stem))
    return {p.stem: p for p in paths}


def reference_source(info) -> str:
    """The correct script a kata was made from: a bundled reference, or the user's own file."""
    bundled = REFERENCE_DIR / f"{info.reference}.py"
    path = bundled if bundled.is_file() else Path(info.reference)
    try:
        return path.read_text()
    except OSError:
        raise KataError(f"the kata was made from {path}, which cannot be read any more") from None


def pick_reference(name: str) -> Path:
    known = references()
    path = known.get(name.removesuffix(".py"))
    if path is None:
        close = difflib.get_close_matches(name, list(known), n=1)
        guess = f" Did you mean `{close[0]}`?" if close else ""
        raise KataError(f"unknown reference `{name}`.{guess}\nReferences: {', '.join(known)}")
    return path


