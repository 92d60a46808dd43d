"""The `kata` command."""
from __future__ import annotations

import json
import random
import secrets
import shlex
import sys
from pathlib import Path

import click

from katas import __version__

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "reference"
DEFAULT_REFERENCE = "classifier"  # the canonical loop; every bug but log0 applies to it


class KataError(click.ClickException):
    """A clear, one-line error for bad input; exit code 2, like click's own usage errors."""

    exit_code = 2

EXIT_CODES = """\b
Exit codes:
  0    every check passed
  1    a symptom is present (or a check could not observe)
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
    ]):
        command = option(command)
    return command


def limits_of(timeout: float, idle: float, memory: float | None):
    from checker.runner import Limits, default_memory_mb

    return Limits(timeout, idle, memory or default_memory_mb())


def observe(path: Path, device: str, limits):
    """Check the file, then run it under observation; bad input becomes a clear error and exit code."""
    from checker.preflight import Unusable, preflight
    from checker.runner import run
    from checker.verdict import judge

    try:
        preflight(path)
    except Unusable as exc:
        if exc.detail:
            click.echo(exc.detail, err=True)
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    return judge(run(path, device, limits), str(path), device, limits)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kata")
def main() -> None:
    """Practise debugging PyTorch training scripts.

    \b
    Start here:
      kata new                             plant a random bug in a reference script
      kata check broken/01.py              check your fix (or any training script)
      kata bugs                            the bugs you can practise on
    """


def references() -> dict[str, Path]:
    """Reference scripts by name, the default first."""
    paths = sorted(REFERENCE_DIR.glob("*.py"), key=lambda p: (p.stem != DEFAULT_REFERENCE, p.stem))
    return {p.stem: p for p in paths}


def pick_reference(name: str) -> Path:
    import difflib

    known = references()
    path = known.get(name.removesuffix(".py"))
    if path is None:
        close = difflib.get_close_matches(name, list(known), n=1)
        guess = f" Did you mean `{close[0]}`?" if close else ""
        raise KataError(f"unknown reference `{name}`.{guess} References: {', '.join(known)}")
    return path


@main.command()
@click.option("--bug", "bug_id", metavar="ID", help="The bug to plant (see `kata bugs`). Default: a random one, kept secret.")
@click.option("--ref", "ref", metavar="NAME", help="Reference script to start from (see `kata bugs`).")
@click.option("--from", "source_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plant the bug in your own training script instead.")
@click.option("--seed", type=int, help="Makes the choice of bug and site reproducible (default: random, recorded).")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("broken"),
              show_default=True, help="Where katas are written.")
@click.option("--number", type=click.IntRange(min=1), help="Write DIR/NN.py instead of the next free number.")
@click.option("--force", is_flag=True, help="With --number: replace an existing file, keeping a backup in DIR/.kata/backup.")
def new(bug_id: str | None, ref: str | None, source_path: Path | None, seed: int | None, folder: Path,
        number: int | None, force: bool) -> None:
    """Plant a known bug in a correct training script and write it as DIR/NN.py.

    The bug is planted by a structure-aware rewrite (libcst), at a place found by
    what the code does, not by line numbers. You are told what you would observe
    when the script runs, never what is wrong, and the command that checks your fix.

    \b
    Examples:
      kata new                         a random bug in a random reference
      kata new --bug leak              a specific bug (mistyped ids get a suggestion)
      kata new --from train.py         plant a random bug in your own script
      kata new --bug detach --seed 3   the same kata every time
    """
    import libcst as cst

    from katas.bugs import BUGS, lookup
    from katas.catalogue import UnknownBug
    from katas.engine.context import Context
    from katas.engine.inject import ENGINE_VERSION, inject, sites
    from katas.workspace import KataInfo, create_numbered, replace_with_backup, write_metadata

    if ref and source_path:
        raise KataError("use either --ref or --from, not both")
    if number is not None and (folder / f"{number:02d}.py").exists() and not force:
        raise KataError(f"{folder / f'{number:02d}.py'} exists; add --force to replace it (a backup is kept)")
    seed = secrets.randbelow(1_000_000) if seed is None else seed
    try:
        bugs = [lookup(bug_id)] if bug_id else list(BUGS.values())
    except UnknownBug as exc:
        raise KataError(str(exc)) from None
    if source_path:
        candidates = [(source_path, str(source_path))]
    else:
        paths = [pick_reference(ref)] if ref else list(references().values())
        candidates = [(p, p.stem) for p in paths]
    origin = str(source_path) if source_path else None

    options = []  # every (bug, script) pairing that has a site, in a fixed order
    for path, label in candidates:
        try:
            ctx = Context(path.read_text())
        except (cst.ParserSyntaxError, UnicodeDecodeError) as exc:
            raise KataError(f"cannot read {path} as Python: {exc}") from None
        options += [(bug, path, label, ctx) for bug in bugs if sites(bug, ctx)]
    if not options:
        if len(bugs) == 1 and len(candidates) == 1:
            raise KataError(f"`{bugs[0].id}` does not apply to {candidates[0][0].name}: {bugs[0].operator.no_site}")
        raise KataError("none of the requested bugs applies to the requested script")
    bug, path, label, ctx = options[0] if bug_id and not source_path and not ref else random.Random(seed).choice(options)
    mutation = inject(bug, ctx, seed, path.name)
    if number is None:
        target = create_numbered(folder, mutation.source)
        backup = None
    else:
        target = folder / f"{number:02d}.py"
        backup = replace_with_backup(target, mutation.source)
    write_metadata(target, KataInfo(ENGINE_VERSION, bug.id, mutation.site, label, seed))

    from katas.render import make_console

    from rich.padding import Padding

    console = make_console()
    origin = origin or f"the {label} reference"
    console.print(f"Wrote [bold]{target}[/] from {origin} (seed {seed})" + (f", bug [bold]{bug.id}[/]" if bug_id else ""))
    if backup:
        console.print(f"The previous {target.name} is saved as {backup}.")
    if mutation.guessed:
        console.print("[yellow]The bug's site was found through a conventional name (e.g. `optimizer`), not by structure.[/]")
    console.print("\n[bold]What you would observe[/]")
    console.print(Padding(bug.observe, (0, 0, 1, 2), expand=False))
    console.print(f"Find the cause and fix it in {target}, then check your fix:")
    console.print(Padding(f"[bold]kata check {shlex.quote(str(target))}[/]", (0, 0, 0, 2), expand=False))


@main.command()
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Task folder: DIR/candidate/ for the candidate, DIR/key/ for you.")
@click.option("--bugs", "n_bugs", type=click.IntRange(1, 6), default=3, show_default=True, help="How many bugs to plant.")
@click.option("--difficulty", type=click.Choice(["easy", "medium", "hard"]),
              help="Hardest bug allowed (default: any); at least one bug of that level when possible.")
@click.option("--seed", type=int, help="Same seed and version, same task, byte for byte (default: random).")
@click.option("--minutes", type=click.IntRange(min=1), default=45, show_default=True, help="Time limit in the brief.")
@click.option("--ref", "ref", metavar="NAME", help="Reference script to start from (default: chosen by the seed).")
@click.option("--key", "key_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the answer key here instead of DIR/key/.")
@click.option("--force", is_flag=True, help="Replace an existing task in DIR (a candidate's edited script is backed up).")
def interview(out: Path, n_bugs: int, difficulty: str | None, seed: int | None, minutes: int, ref: str | None,
              key_dir: Path | None, force: bool) -> None:
    """Generate a randomized interview task: several disguised bugs, a brief and an answer key.

    The candidate's script is a reference script disguised (renamed, reordered,
    rewritten, re-documented) so that a diff against the published reference
    points nowhere, with N distinct bugs whose symptoms are each observable.
    Hand DIR/candidate/ to the candidate; keep the key. Afterwards, `kata grade DIR`.

    \b
    Example:
      kata interview --bugs 3 --difficulty medium --minutes 45 --out task-ada
    """
    from datetime import datetime, timezone

    from katas.interview.documents import SCRIPT, brief, key_json, key_markdown
    from katas.interview.task import TaskError, generate
    from katas.workspace import replace_with_backup, write_text_atomically

    seed = secrets.randbelow(1_000_000) if seed is None else seed
    key_dir = key_dir or out / "key"
    script = out / "candidate" / SCRIPT
    if (script.exists() or (key_dir / "key.json").exists()) and not force:
        raise KataError(f"{out} already holds a task; use another --out, or --force to replace it")
    name = ref.removesuffix(".py") if ref else random.Random(f"reference:{seed}").choice(sorted(references()))
    path = pick_reference(name)
    try:
        task = generate(path.stem, path.read_text(), n_bugs, seed, difficulty)
    except TaskError as exc:
        raise KataError(str(exc)) from None
    backup = replace_with_backup(script, task.script) if force else write_text_atomically(script, task.script)
    write_text_atomically(out / "candidate" / "README.md", brief(task, minutes))
    write_text_atomically(key_dir / "key.md", key_markdown(task, minutes))
    write_text_atomically(key_dir / "key.json", json.dumps(key_json(task, minutes), indent=2) + "\n")
    write_text_atomically(key_dir / "solution.py", task.solution)
    write_text_atomically(key_dir / "issued.json", json.dumps({"issued_at": datetime.now(timezone.utc).isoformat()}) + "\n")

    from katas.render import make_console

    console = make_console()
    console.print(f"Task with {n_bugs} bugs (seed {seed}) written to [bold]{out}[/].")
    if backup:
        console.print(f"The previous candidate script is saved as {backup}.")
    console.print(f"  for the candidate: {script.parent}/  (train.py and README.md, {minutes} minutes)")
    console.print(f"  for you:           {key_dir}/  (key.md, solution.py; keep it away from the candidate)")
    console.print(f"Afterwards: [bold]kata grade {shlex.quote(str(out))}[/]" + (f" --key {shlex.quote(str(key_dir))}" if key_dir != out / "key" else ""))


@main.command(epilog=EXIT_CODES.replace("every check passed", "every bug fixed, no new symptom, still trains"))
@click.argument("task_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--key", "key_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The answer key's folder (default: TASK_DIR/key).")
@run_options
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the Markdown report (default: KEY/report.md).")
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON grade.")
def grade(task_dir: Path, key_dir: Path | None, device: str, timeout: float, idle: float, memory: float | None,
          report_path: Path | None, as_json: bool) -> None:
    """Grade an interview task: which planted bugs are fixed, what new symptoms appeared, time taken.

    Runs the checker on TASK_DIR/candidate/train.py (see `kata check`) and reads
    its findings against the answer key. Writes a Markdown report for your records.
    """
    from katas.interview.grade import BadKey, grade as grade_task, markdown, script_of
    from katas.workspace import write_text_atomically

    key_dir = key_dir or task_dir / "key"
    script = script_of(task_dir)
    if not script.is_file():
        raise KataError(f"no candidate script at {script}")
    try:
        result = grade_task(script, key_dir, observe(script, device, limits_of(timeout, idle, memory)))
    except BadKey as exc:
        raise KataError(str(exc)) from None
    report_path = report_path or key_dir / "report.md"
    write_text_atomically(report_path, markdown(result))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        sys.exit(result.exit_code)
    from rich.table import Table

    from katas.render import INJECTED, make_console

    console = make_console()
    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("bug", "title", "status"):
        table.add_column(column)
    for b in result.bugs:
        table.add_row(b["id"], b["title"], f"[{INJECTED[b['status']]}]{b['status']}[/]")
    console.print(table)
    for s in result.new_symptoms:
        console.print(f"[red]new symptom[/] {s['probe']}: {s['message']}")
    taken = "not edited" if result.minutes_taken is None else f"{result.minutes_taken:.0f} min"
    fixed = sum(b["status"] == "fixed" for b in result.bugs)
    console.print(f"{fixed} of {len(result.bugs)} fixed; health gate: {result.health}; time: {taken} of "
                  f"{result.key['minutes']} min")
    if result.report.verdict not in ("pass", "fail"):
        console.print(f"[red]{result.report.problem}[/]")
    console.print(f"Report written to {report_path}")
    sys.exit(result.exit_code)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
def bugs(as_json: bool) -> None:
    """List the bugs you can practise on, and the reference scripts each applies to."""
    from katas.bugs import BUGS
    from katas.engine.context import Context
    from katas.engine.inject import sites

    contexts = {name: Context(path.read_text()) for name, path in references().items()}
    rows = [{"id": b.id, "title": b.title, "difficulty": b.difficulty, "probes": list(b.probes),
             "references": [name for name, ctx in contexts.items() if sites(b, ctx)]} for b in BUGS.values()]
    if as_json:
        click.echo(json.dumps({"schema": "torch-katas/bugs/1", "bugs": rows}, indent=2))
        return
    from rich.table import Table

    from katas.render import make_console

    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("id", "title", "difficulty", "probes", "applies to"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["id"], row["title"], row["difficulty"], ", ".join(row["probes"]), ", ".join(row["references"]))
    console = make_console()
    console.print(table)
    console.print("\nPractise one with [bold]kata new --bug ID[/], or let chance pick with [bold]kata new[/].")


@main.command(epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path))
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report.")
def check(path: Path, device: str, timeout: float, idle: float, memory: float | None, as_json: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process, in a scratch folder, exactly
    as `python PATH` would. PyTorch hooks watch it train; each probe decides
    from what the program did, never from its text. The file is not modified.

    \b
    Probes: grads-accumulate, graphs-retained, eval-mode, train-mode,
    gradient-flow, lr-schedule, non-finite, worker-rng, clip-order,
    and the health gate (the script must still train and learn).
    """
    from katas.bugs import BUGS
    from katas.workspace import read_metadata

    report = observe(path, device, limits_of(timeout, idle, memory))
    info = read_metadata(path)
    injected = BUGS[info.bug].status({f.probe: f.status for f in report.findings}) if info and info.bug in BUGS else None
    if as_json:
        doc = report.to_json()
        if injected:
            doc["kata"] = {"injected_bug": injected}
        click.echo(json.dumps(doc, indent=2))
    else:
        from katas.render import make_console, show

        show(report, make_console(), f"kata check {shlex.quote(str(path))}", injected)
    sys.exit(report.exit_code)
