"""`kata interview` and `kata grade`: randomized interview tasks."""
from __future__ import annotations

import json
import random
import secrets
import shlex
import sys
from pathlib import Path

import click

from katas.catalogue import DIFFICULTIES, LAUNCHED
from katas.commands.common import (
    EXIT_CODES,
    KataError,
    limits_of,
    observe,
    pick_reference,
    references,
    run_options,
)


@click.command()
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Task folder: DIR/candidate/ for the candidate, DIR/key/ for you.")
@click.option("--bugs", "n_bugs", type=click.IntRange(1, 6), default=3, show_default=True, help="How many bugs to plant.")
@click.option("--difficulty", type=click.Choice(list(DIFFICULTIES)),
              help="Hardest level allowed, and drawn first (default: any level). easy: the run's output shows "
                   "something is wrong; medium: one standard measurement shows it; hard: the output looks normal "
                   "(see `kata bugs`).")
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

    from katas.interview import marker
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
    write_text_atomically(out / "candidate" / marker.MARK, marker.mark(LAUNCHED.get(path.stem, 1)))
    write_text_atomically(key_dir / "key.md", key_markdown(task, minutes))
    write_text_atomically(key_dir / "key.json", json.dumps(key_json(task, minutes), indent=2) + "\n")
    write_text_atomically(key_dir / "solution.py", task.solution)
    write_text_atomically(key_dir / "issued.json", json.dumps({"issued_at": datetime.now(timezone.utc).isoformat()}) + "\n")

    from katas.render import make_console

    console = make_console()
    console.print(f"Task with {n_bugs} bugs (seed {seed}) written to [bold]{out}[/].")
    if backup:
        console.print(f"The previous candidate script is saved as {backup}.")
    console.print(f"  for the candidate: {script.parent}/  (train.py, README.md and {marker.MARK}, {minutes} minutes)")
    console.print(f"  for you:           {key_dir}/  (key.md, solution.py; keep it away from the candidate)")
    key_option = f" --key {shlex.quote(str(key_dir))}" if key_dir != out / "key" else ""
    console.print(f"Afterwards: [bold]kata grade {shlex.quote(str(out))}{key_option}[/]")


@click.command(epilog=EXIT_CODES.replace("no symptom: every check passed, gave advice, or could not tell",
                                                       "every bug fixed, no new symptom, still trains"))
@click.argument("task_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--key", "key_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The answer key's folder (default: TASK_DIR/key).")
@run_options
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the Markdown report (default: KEY/report.md).")
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON grade.")
def grade(task_dir: Path, key_dir: Path | None, device: str, timeout: float, idle: float, memory: float | None,
          nproc: int | None, report_path: Path | None, as_json: bool) -> None:
    """Grade an interview task: which planted bugs are fixed, what new symptoms appeared, time taken.

    Runs the checker on TASK_DIR/candidate/train.py (see `kata check`) and reads
    its findings against the answer key. Writes a Markdown report for your records.
    """
    from katas.interview.grade import SCHEMA, BadKey, expectation, load_key, markdown, script_of
    from katas.interview.grade import grade as grade_task
    from katas.workspace import write_text_atomically

    key_dir = key_dir or task_dir / "key"
    script = script_of(task_dir)
    try:
        if not script.is_file():
            raise KataError(f"no candidate script at {script}")
        key = load_key(key_dir)
    except (KataError, BadKey) as exc:
        if as_json:
            click.echo(json.dumps({"schema": SCHEMA, "error": str(exc), "exit_code": KataError.exit_code}, indent=2))
        raise KataError(str(exc)) from None
    ranks = nproc or LAUNCHED.get(key.get("reference"), 1)
    report = observe(script, device, limits_of(timeout, idle, memory), nproc=ranks, expect=expectation(key))
    result = grade_task(script, key_dir, report)
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
    fixed = sum(b["status"] == "fixed" for b in result.bugs)
    console.print(f"{fixed} of {len(result.bugs)} fixed; health gate: {result.health}; {time_taken(result)}")
    console.print(diagnosed(result))
    if not result.report.verdict.ran:
        console.print(f"[red]{result.report.problem}[/]")
    console.print(f"Report written to {report_path}")
    sys.exit(result.exit_code)


def time_taken(result) -> str:
    limit = result.key["minutes"]
    if result.minutes_taken is None:
        return f"time: unknown, the script was not edited (limit {limit} min)"
    return f"time: {result.minutes_taken:.0f} of {limit} min"


def diagnosed(result) -> str:
    if result.diagnosed is None:
        return "--diagnose: unknown (the task's mark was removed from the candidate folder)"
    if not result.diagnosed:
        return "--diagnose: not used"
    return f"--diagnose: used {len(result.diagnosed)} times, first at {result.diagnosed[0]}"

