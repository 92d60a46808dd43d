"""`kata interview` and `kata grade`: randomized interview tasks, handed over, then graded one or several at a time."""
from __future__ import annotations

import json
import os
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

DRAWS = 3  # tasks drawn in turn when a planted bug's symptom does not show in the task's run


@click.command()
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Task folder: DIR/candidate/ for the candidate, DIR/key/ for you.")
@click.option("--start", "start", type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR",
              help="Record that the task in DIR (a task folder, or a copy of its candidate/ folder) is handed over "
                   "now: the time taken is counted from here.")
@click.option("--candidate", "candidate", metavar="NAME", help="The candidate's name, as `kata grade` shows it.")
@click.option("--bugs", "n_bugs", type=click.IntRange(1, 6), default=3, show_default=True, help="How many bugs to plant.")
@click.option("--difficulty", type=click.Choice(list(DIFFICULTIES)),
              help="Hardest level allowed, and drawn first (default: any level). easy: the run's output shows "
                   "something is wrong; medium: one standard measurement shows it; hard: the output looks normal "
                   "(see `kata bugs`).")
@click.option("--seed", type=int, help="Same seed and version, same task (default: random).")
@click.option("--minutes", type=click.IntRange(min=1), default=45, show_default=True, help="Time limit in the brief.")
@click.option("--ref", "ref", metavar="NAME", help="Reference script to start from (default: chosen by the seed).")
@click.option("--key", "key_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the answer key here instead of DIR/key/.")
@click.option("--force", is_flag=True, help="Replace an existing task in DIR (a candidate's edited script is backed up); "
                                            "with --start, record a new hand-over.")
def interview(out: Path | None, start: Path | None, candidate: str | None, n_bugs: int, difficulty: str | None,
              seed: int | None, minutes: int, ref: str | None, key_dir: Path | None, force: bool) -> None:
    """Generate a randomized interview task: several disguised bugs, a brief and an answer key.

    The candidate's script is a reference script disguised (renamed, reordered,
    rewritten, re-documented) so that a diff against the published reference
    points nowhere, with N distinct bugs. It is run once under `kata check`: a
    draw whose bug does not show is drawn again without it, and the brief says
    what that run showed (symptoms, never causes, in words the catalogue does
    not hold). Inside the candidate folder, `kata explain`, `kata bugs` and
    `kata hint` do not answer.

    Hand DIR/candidate/ to the candidate (or a copy to each of several) and
    record the hand-over with --start; keep the key. Afterwards, `kata grade DIR`.

    \b
    Examples:
      kata interview --bugs 3 --difficulty medium --minutes 45 --out task
      kata interview --start task --candidate "Ada Lovelace"
      cp -r task/candidate bob && kata interview --start bob --candidate Bob
    """
    if (out is None) == (start is None):
        raise click.UsageError("give --out DIR to generate a task, or --start DIR to hand one over")
    if start is not None:
        hand_over(start, candidate, force)
    else:
        generate_task(out, candidate, n_bugs, difficulty, seed, minutes, ref, key_dir, force)


def generate_task(out: Path, candidate: str | None, n_bugs: int, difficulty: str | None, seed: int | None,
                  minutes: int, ref: str | None, key_dir: Path | None, force: bool) -> None:
    from datetime import datetime, timezone

    from katas.interview import marker
    from katas.interview.documents import SCRIPT, brief, key_json, key_markdown
    from katas.interview.symptoms import describe
    from katas.workspace import replace_with_backup, write_text_atomically

    seed = secrets.randbelow(1_000_000) if seed is None else seed
    key_dir = key_dir or out / "key"
    script = out / "candidate" / SCRIPT
    if (script.exists() or (key_dir / "key.json").exists()) and not force:
        raise KataError(f"{out} already holds a task; use another --out, or --force to replace it")
    name = ref.removesuffix(".py") if ref else random.Random(f"reference:{seed}").choice(sorted(references()))
    path = pick_reference(name)
    task, report = visible_task(path, n_bugs, seed, difficulty)
    observed = describe(report, catalogue(), SCRIPT)
    backup = replace_with_backup(script, task.script) if force else write_text_atomically(script, task.script)
    write_text_atomically(out / "candidate" / "README.md", brief(task, minutes, observed))
    write_text_atomically(out / "candidate" / marker.MARK, marker.mark(LAUNCHED.get(path.stem, 1), candidate))
    write_text_atomically(key_dir / "key.md", key_markdown(task, minutes))
    health = report.statuses().get("health", "n/a")
    write_text_atomically(key_dir / "key.json", json.dumps(key_json(task, minutes, health), indent=2) + "\n")
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
    console.print(f"When you hand it over: [bold]kata interview --start {shlex.quote(str(out))}[/]")
    console.print(f"Afterwards: [bold]kata grade {shlex.quote(str(out))}{key_option}[/]")


def visible_task(path: Path, n_bugs: int, seed: int, difficulty: str | None):
    """(task, the report of its run): a task whose every planted bug shows its symptom in that run. A bug that does
    not is left out of the next draw (the same seed draws the same, on the same version)."""
    from katas.commands.new import checked_text, shows
    from katas.interview.documents import SCRIPT
    from katas.interview.task import TaskError, generate

    excluded: frozenset[str] = frozenset()
    for _ in range(DRAWS):
        try:
            task = generate(path.stem, path.read_text(), n_bugs, seed, difficulty, excluded)
        except TaskError as exc:
            raise KataError(str(exc)) from None
        click.echo("Running the task's script under kata check, for its brief ...", err=True)
        report = checked_text(task.script, SCRIPT, "cpu", limits_of(300, 30, None), LAUNCHED.get(path.stem, 1))
        if not report.verdict.ran:
            raise KataError(f"the task's script did not run under kata check ({report.problem}); try another --seed")
        unseen = frozenset(p.bug.id for p in task.planted if not shows(p.bug, report))
        if not unseen:
            return task, report
        excluded |= unseen
    raise KataError(f"the symptoms of {', '.join(sorted(excluded))} did not show when the task ran; try another --seed")


def catalogue():
    """What a search could find the brief's words in: every `kata explain` page, the docs (generated, and
    written by hand where this copy of torch-katas has them)."""
    from katas.bugs import BUGS
    from katas.commands.learner import explain_page
    from katas.docs import DOCS, pages
    from katas.interview.symptoms import Catalogue

    texts = [explain_page(bug) for bug in BUGS.values()]
    # bugs.md's table holds the titles the pages above hold, beside ids and reference names; making it finds every
    # bug's sites in every reference (seconds), so only its copy on disk is read, with the other hand-kept pages.
    texts += [page() for name, page in pages().items() if name != "bugs.md"]
    texts += [p.read_text() for p in sorted(DOCS.glob("*.md"))]
    return Catalogue.of(texts)


def hand_over(folder: Path, candidate: str | None, force: bool) -> None:
    from katas.interview import marker

    if marker.read(folder) is None and marker.read(folder / "candidate") is not None:
        folder = folder / "candidate"
    doc = marker.read(folder)
    if doc is None:
        raise KataError(f"{folder} is not an interview task's candidate folder (no {marker.MARK}); "
                        "name the task folder or a copy of its candidate/ folder")
    if doc.get("handed_over") and not force:
        raise KataError(f"{folder} was handed over at {doc['handed_over']}; --force records a new hand-over")
    doc = marker.update(folder, handed_over=marker.now(), **({"candidate": candidate} if candidate else {}))
    who = f" to {doc['candidate']}" if doc.get("candidate") else ""
    click.echo(f"Handed over {folder}{who} at {doc['handed_over']}; the time taken counts from now.")


@click.command(epilog=EXIT_CODES.replace("no symptom: every check passed, gave advice, or could not tell",
                                         "every bug fixed, no new symptom, still trains (every candidate's)"))
@click.argument("task_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("candidate_dirs", nargs=-1, metavar="[CANDIDATE_DIR]...",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--submissions", "submissions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              metavar="DIR", help="Grade every submission in DIR: each folder in it that holds the task's script "
                                  "(named as at --start, else by the folder), and each .py file in DIR itself "
                                  "(named by the file).")
@click.option("--key", "key_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The answer key's folder (default: TASK_DIR/key).")
@click.option("--name", help="The candidate's name (one candidate; default: the name given at --start, else the "
                             "folder's name).")
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="Candidates checked at once (default: one per core).")
@run_options
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the Markdown report (default: KEY/report.md; KEY/grades.md for several).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table as CSV here (default for several candidates: KEY/grades.csv).")
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON grade (of each candidate).")
def grade(task_dir: Path, candidate_dirs: tuple[Path, ...], submissions_dir: Path | None, key_dir: Path | None,
          name: str | None, jobs: int | None,
          device: str, timeout: float, idle: float, memory: float | None, nproc: int | None, report_path: Path | None,
          csv_path: Path | None, as_json: bool) -> None:
    """Grade an interview task: which planted bugs are fixed, what new symptoms appeared, time taken, a score.

    Runs the checker on TASK_DIR/candidate/train.py (see `kata check`), or on
    each CANDIDATE_DIR/train.py side by side, and reads the findings against the
    answer key. The score follows the key's rubric: 2 points per bug fixed while
    the script still trains, less 1 per new symptom, of 4 per bug (the other 2
    are the interview's). Time runs from the hand-over (`kata interview --start`,
    else the candidate's first `kata check`) to the script's last change.
    Several candidates make one table, written as Markdown and CSV; they are
    checked side by side, one per core, and one that hangs or crashes costs
    only its own row.

    \b
    Examples:
      kata grade task
      kata grade task ada/ bob/ cy/ --csv grades.csv
      kata grade task --submissions handed-in/ --timeout 120
    """
    from katas.interview.batch import exit_code, grade_all
    from katas.interview.grade import SCHEMA, BadKey, Submission, expectation, load_key, script_of

    key_dir = key_dir or task_dir / "key"
    script_name = script_of(task_dir).name
    folders = list(candidate_dirs)
    try:
        handed_in = submissions_in(submissions_dir, script_name) if submissions_dir else []
        if not folders and not handed_in:
            folders = [script_of(task_dir).parent]
        if name and len(folders) + len(handed_in) > 1:
            raise KataError("--name names one candidate; with several, each is named at `kata interview --start "
                            "DIR --candidate NAME`, or by its folder")
        if not candidate_dirs and not submissions_dir and not script_of(task_dir).is_file():
            raise KataError(f"no candidate script at {script_of(task_dir)}")
        key = load_key(key_dir)
    except (KataError, BadKey) as exc:
        if as_json:
            click.echo(json.dumps({"schema": SCHEMA, "error": str(exc), "exit_code": KataError.exit_code}, indent=2))
        raise KataError(str(exc)) from None
    submissions = [Submission(name or candidate_name(folder), folder / script_name) for folder in folders]
    submissions += handed_in
    ranks = nproc or LAUNCHED.get(key.get("reference"), 1)
    limits = limits_of(timeout, idle, memory)
    jobs = jobs or os.cpu_count() or 1
    from checker.runner import child_env
    from checker.warm import WarmPool

    # More submissions than workers: each worker imports torch once, in its warm server, and forks every check of
    # its share from it.
    with WarmPool(child_env()) as pool:
        warm = len(submissions) > jobs

        def check(script: Path):
            return observe(script, device, limits, warm=pool.server() if warm else None, nproc=ranks,
                           expect=expectation(key))

        grades = grade_all(submissions, key_dir, key, check, jobs)
    if len(grades) == 1:
        show_one(grades[0], key_dir, report_path, csv_path, as_json, key)
    else:
        show_several(grades, key, key_dir, report_path, csv_path, as_json)
    sys.exit(exit_code(grades))


def submissions_in(folder: Path, script_name: str) -> list:
    """The submissions handed in to ``folder``, by name: each subfolder holding the task's script, each .py file."""
    from katas.interview.grade import Submission

    found = [Submission(candidate_name(sub), sub / script_name) for sub in folder.iterdir()
             if sub.is_dir() and (sub / script_name).is_file()]
    found += [Submission(file.stem, file) for file in folder.glob("*.py") if file.is_file()]
    if not found:
        raise KataError(f"no submissions in {folder}: expected folders that hold {script_name}, or .py files")
    names = [s.name for s in found]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise KataError(f"two submissions in {folder} are named {', '.join(doubled)}; rename one")
    return sorted(found, key=lambda s: s.name.casefold())


def candidate_name(folder: Path) -> str:
    """The name given at hand-over, else the folder's (the task folder's, for its own candidate/ folder)."""
    from katas.interview import marker

    recorded = (marker.read(folder) or {}).get("candidate")
    resolved = folder.resolve()
    return recorded or (resolved.parent.name if resolved.name == "candidate" else resolved.name)


def show_one(g, key_dir: Path, report_path: Path | None, csv_path: Path | None, as_json: bool, key: dict) -> None:
    from katas.interview.batch import csv_text
    from katas.interview.grade import Ungraded, diagnosed, markdown
    from katas.workspace import write_text_atomically

    if isinstance(g, Ungraded):  # the grading itself failed
        click.echo(json.dumps(g.to_json(), indent=2) if as_json else f"Error: {g.problem}", err=not as_json)
        return
    report_path = report_path or key_dir / "report.md"
    write_text_atomically(report_path, markdown(g))
    if csv_path:
        write_text_atomically(csv_path, csv_text([g], key))
    if as_json:
        click.echo(json.dumps(g.to_json(), indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    from katas.render import INJECTED, make_console

    console = make_console()
    console.print(f"[bold]{escape(g.submission.name)}[/]: {escape(str(g.script))}")
    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("bug", "title", "difficulty", "status"):
        table.add_column(column)
    for b in g.bugs:
        table.add_row(b["id"], b["title"], b["difficulty"], f"[{INJECTED[b['status']]}]{b['status']}[/]")
    console.print(table)
    for s in g.new_symptoms:
        console.print(f"[red]new symptom[/] {s['probe']}: {escape(s['message'])}")
    score = g.score
    console.print(f"[bold]score {score.points} of {score.maximum}[/]: {score.breakdown()}", highlight=False)
    console.print(f"{g.fixed} of {len(g.bugs)} fixed; health gate: {g.health}; time: "
                  + (f"[bold red]{g.timing}[/]" if g.timing.over is not None else str(g.timing)), highlight=False)
    console.print(f"--diagnose: {diagnosed(g)}", highlight=False)
    if not g.report.verdict.ran:
        console.print(f"[red]{escape(g.report.problem)}[/]")
    console.print(f"Report written to {report_path}" + (f"; CSV to {csv_path}" if csv_path else ""))


def show_several(grades: list, key: dict, key_dir: Path, report_path: Path | None, csv_path: Path | None,
                 as_json: bool) -> None:
    from katas.interview.batch import cells, columns, csv_text, markdown_report
    from katas.workspace import write_text_atomically

    report_path = report_path or key_dir / "grades.md"
    csv_path = csv_path or key_dir / "grades.csv"
    write_text_atomically(report_path, markdown_report(grades, key))
    write_text_atomically(csv_path, csv_text(grades, key))
    if as_json:
        click.echo(json.dumps({"schema": "torch-katas/grades/1", "seed": key["seed"],
                               "grades": [g.to_json() for g in grades]}, indent=2))
        return
    from rich.markup import escape
    from rich.table import Table

    from katas.interview.grade import Ungraded
    from katas.render import INJECTED, make_console

    shown = [c for c in columns(key) if c != "outcome"]  # said below the table, for the scripts that did not run
    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in shown:
        table.add_column(column.replace(" (", "\n("))
    for g in grades:
        row = cells(g, key)
        table.add_row(*(f"[{INJECTED[row[c]]}]{row[c]}[/]" if row[c] in INJECTED else escape(row[c]) for c in shown))
    console = make_console()
    console.print(table)
    for g in grades:
        if isinstance(g, Ungraded) or not g.report.verdict.ran:
            console.print(f"[red]{escape(g.submission.name)}[/]: {escape(cells(g, key)['outcome'])}")
    console.print(f"Report written to {report_path}; CSV to {csv_path}")
