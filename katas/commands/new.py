"""`kata new` and `kata bugs`: planting bugs, and the catalogue."""
from __future__ import annotations

import json
import secrets
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from katas.catalogue import LAUNCHED
from katas.commands.common import (
    KataError,
    limits_of,
    observe,
    pick_reference,
    references,
    run_options,
)
from katas.commands.learner import complete_bug, dir_flag, refuse_in_task
from katas.making import Start, applicable, first_fit, read_start, seeded_order

if TYPE_CHECKING:
    from checker.verdict import Report
    from katas.catalogue import Bug
    from katas.observation import Observation


def complete_reference(ctx, param, incomplete: str) -> list[str]:
    return [name for name in references() if name.startswith(incomplete)]


@click.command()
@click.option("--bug", "bug_id", metavar="ID", shell_complete=complete_bug,
              help="The bug to plant (see `kata bugs`). Default: a random one, kept secret.")
@click.option("--ref", "ref", metavar="NAME", shell_complete=complete_reference,
              help="Reference script to start from (see `kata bugs`).")
@click.option("--from", "source_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plant the bug in your own training script instead.")
@click.option("--plain", is_flag=True,
              help="Keep the script's exact text, comments and docstrings included (for teaching). By default it is "
                   "disguised: renamed, reordered, without its comments, so that a diff against it points nowhere.")
@click.option("--seed", type=int, help="Makes the choice of bug and site reproducible (default: random, recorded).")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="Where katas are written (default: your workspace, found here or above as `kata` finds it; "
                   "else a new one, practice/).")
@click.option("--number", type=click.IntRange(min=1), help="Write DIR/NN.py instead of the next free number.")
@click.option("--force", is_flag=True, help="With --number: replace an existing file, keeping a backup in DIR/.kata/backup.")
@click.option("--no-verify", is_flag=True,
              help="Do not run the kata and the correct script under `kata check`: faster, but what you would observe "
                   "is then only what such a bug typically shows, and with --from the kata may not show its bug.")
@run_options
def new(bug_id: str | None, ref: str | None, source_path: Path | None, plain: bool, seed: int | None,
        folder: Path | None, number: int | None, force: bool, no_verify: bool, device: str, timeout: float,
        idle: float, memory: float | None, nproc: int | None) -> None:
    """Plant a known bug in a correct training script and write it as DIR/NN.py.

    The script is first disguised (unless --plain), then the bug is planted by a
    structure-aware rewrite (libcst), at a place found by what the code does, not
    by line numbers. The kata and the correct script then run under `kata check`
    (side by side; the correct script's run is cached): you are told what the
    kata's run shows beside the correct one, measured, never what is wrong, and
    the command that checks your fix. Where its output looks normal, it also
    says what a measurement shows.

    With --from, your script is first run under `kata check` (disguised, and as
    it is if that differs), then with the bug planted (in a temporary copy) until
    a place is found where the check sees the bug's symptom; --device, --timeout,
    --idle and --memory apply to these runs. Your script is never modified.

    \b
    Examples:
      kata new                         a random bug in a random reference
      kata new --bug leak              a specific bug (mistyped ids get a suggestion)
      kata new --from train.py         plant a random bug in your own script
      kata new --bug detach --seed 3   the same kata every time
    """
    from katas.bugs import BUGS, lookup
    from katas.catalogue import UnknownBug, difficulty
    from katas.engine.inject import ENGINE_VERSION, inject
    from katas.observation import Measured, Shows, describe, typical
    from katas.workspace import (
        KataInfo,
        create_numbered,
        default_workspace,
        find_workspace,
        replace_with_backup,
        write_metadata,
    )

    if ref and source_path:
        raise KataError("use either --ref or --from, not both")
    folder = folder or find_workspace()
    started = folder is None  # the kata written below starts the default workspace
    folder = folder or default_workspace()
    if number is not None and (folder / f"{number:02d}.py").exists() and not force:
        raise KataError(f"{folder / f'{number:02d}.py'} exists; add --force to replace it (a backup is kept)")
    seed = secrets.randbelow(1_000_000) if seed is None else seed
    try:
        bugs = [lookup(bug_id)] if bug_id else list(BUGS.values())
    except UnknownBug as exc:
        raise KataError(str(exc)) from None
    if source_path:
        runnable(source_path)
        scripts = [(source_path, str(source_path.resolve()))]  # recorded absolute: reset works from any folder
    else:
        scripts = [(p, p.stem) for p in ([pick_reference(ref)] if ref else references().values())]
    options = applicable(bugs, scripts, seed)
    order = [next(options)] if bug_id and not source_path and not ref else seeded_order(list(options), seed)
    bug, start = first_fit(order, seed, plain)
    ranks = nproc or LAUNCHED.get(start.label, 1)
    already: tuple[str, ...] = ()  # what your own script shows before any bug: it does not keep the kata unsolved
    limits = limits_of(timeout, idle, memory)
    if source_path and not no_verify:
        start, baseline = settled(start, seed, device, limits, ranks)
        bug, mutation, planted = plant_verified([b for b, _ in order], start, baseline, seed, not bug_id, device,
                                                planted_limits(limits, baseline.seconds), ranks)
        from checker.verdict import failing

        already = failing(baseline)
        observation = describe(Measured.of(planted), Measured.of(baseline), bug.difficulty)
        if Shows.PRINTED in observation.shows:  # a difference in printed figures: do they repeat without the bug?
            click.echo(f"Checking that {start.path.name}'s printed figures repeat without the bug ...", err=True)
            again = checked(start.path, device, limits, ranks) if start.plain else \
                checked_text(start.text, start.path.name, device, limits, ranks, start.beside)
            observation = describe(Measured.of(planted), Measured.of(baseline), bug.difficulty, Measured.of(again))
    else:
        mutation = inject(bug, start.ctx, seed, start.path.name)
        observation = typical(bug.observe, difficulty(bug, None if source_path else start.label)) if no_verify else \
            observed(start, mutation.source, bug, device, limits, ranks)
    if number is None:
        target = create_numbered(folder, mutation.source)
        backup = None
    else:
        target = folder / f"{number:02d}.py"
        backup = replace_with_backup(target, mutation.source)
    write_metadata(target, KataInfo(ENGINE_VERSION, bug.id, mutation.site, start.label, seed, start.plain, ranks,
                                    already, observation.to_json(), mutation.guessed))

    from rich.padding import Padding

    from katas.render import make_console

    console = make_console()
    if started:
        console.print(f"Started your workspace [bold]{folder}/[/] (your katas and your progress live there).")
    origin = str(source_path) if source_path else f"the {start.label} reference"
    console.print(f"Wrote [bold]{target}[/] from {origin} (seed {seed})" + (f", bug [bold]{bug.id}[/]" if bug_id else ""))
    if backup:
        console.print(f"The previous {target.name} is saved as {backup}.")
    if source_path:
        console.print("[yellow]Not verified (--no-verify): the kata may not show its bug.[/]" if no_verify else
                      "Verified: `kata check` sees the bug's symptom in it.")
        if already:
            console.print(f"{source_path.name} already failed these checks before the bug was planted: "
                          f"{', '.join(already)}. They stay as they are and do not keep the kata unsolved.")
    console.print(f"\n[bold]What you would observe[/] (difficulty: {observation.difficulty})")
    console.print(Padding(said(observation.lines), (0, 0, 1, 2), expand=False))
    if ranks > 1:
        console.print(f"It runs as {ranks} processes ([bold]torchrun --standalone --nproc-per-node {ranks} {target}[/]); "
                      "`kata check` launches it that way.")
    console.print(f"Find the cause and fix it in {target}, then check your fix:")
    console.print(Padding(f"[bold]kata check {shlex.quote(str(target))}[/]", (0, 0, 0, 2), expand=False))
    where = dir_flag(folder)
    console.print(f"(or re-check on every save: [bold]kata watch {target.stem}{where}[/]; "
                  f"stuck? [bold]kata hint {target.stem}{where}[/])")


def runnable(path: Path) -> None:
    """Refuse, as `kata check` would, a script that cannot run: not a UTF-8 .py file, empty, or with a syntax error
    (Python's own report of it, with the line and a caret, then the one-line error)."""
    from checker.preflight import Unusable, preflight

    try:
        preflight(path)
    except Unusable as exc:
        if exc.detail:
            click.echo(exc.detail, err=True)
        raise KataError(str(exc)) from None


def said(lines: tuple[str, ...]):
    """An observation's lines for the terminal: sentences as they are, bullets (``- ...``) with a hanging indent."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list = []
    for line in lines:
        if not line.startswith("- "):
            parts.append(Text(line))
            continue
        if not parts or not isinstance(parts[-1], Table):
            parts.append(Table.grid(padding=(0, 1)))
            parts[-1].add_column(no_wrap=True)
            parts[-1].add_column()
        parts[-1].add_row("-", Text(line[2:]))
    return Group(*parts)


def settled(start: Start, seed: int, device: str, limits, nproc: int = 1) -> tuple[Start, Report]:
    """The script to plant into, and `kata check`'s report on it before any bug: the disguise, unless it
    changed what the script does (then your script's own text, and `kata new` says so)."""
    name = start.path.name
    click.echo(f"Checking {name} as it is ...", err=True)
    report = checked(start.path, device, limits, nproc) if start.plain else \
        checked_text(start.text, name, device, limits, nproc, start.beside)
    if not start.plain and report.verdict != "pass":
        original = checked(start.path, device, limits, nproc)
        if original.verdict.ran and symptoms(original) != symptoms(report):
            click.echo(f"Kept {name}'s own text: disguising it changed what it does.", err=True)
            return read_start(start.path, start.label, seed, plain=True), original
        report = original
    if not report.verdict.ran:
        raise KataError(f"kata check cannot run {name}: {report.problem}")
    return start, report


PLANTED_TIMES, PLANTED_FLOOR = 5.0, 30.0  # a planted run may take this many times the correct script's, and this long


def planted_limits(limits, correct_seconds: float):
    """How long a planted run may take: five times the correct script's (at least 30 s, at most --timeout). A bug
    that keeps a script from ending (a loop that trains until the loss is small enough) then costs a site, not
    the whole --timeout."""
    from dataclasses import replace

    return replace(limits, timeout=min(limits.timeout, max(PLANTED_FLOOR, PLANTED_TIMES * correct_seconds)))


def symptoms(report: Report) -> tuple[str, set[str]]:
    return report.verdict, {f.probe for f in report.findings if f.flagged}


def plant_verified(bugs: list[Bug], start: Start, baseline, seed: int, at_random: bool, device: str, limits,
                   nproc: int = 1):
    """(bug, mutation, report) for the first of ``bugs`` with a site in ``start``, and the first of its sites in the
    seed's order, where `kata check` sees the bug's symptom (``report``, of a temporary copy)."""
    from katas.engine.inject import inject, ordered_sites

    name = start.path.name
    tried = []
    for bug in bugs:
        sites = ordered_sites(bug, start.ctx, seed)
        if not sites:
            continue
        if bug.status(baseline.statuses()) == "still present":
            if not at_random:
                raise KataError(f"{name} already shows the symptom of `{bug.id}` before any bug is planted "
                                f"({symptom(bug, baseline)})")
            continue
        for i, site in enumerate(sites, 1):
            click.echo(f"Checking that the bug shows when {name} runs (site {i} of {len(sites)}) ...", err=True)
            mutation = inject(bug, start.ctx, seed, name, site.id)
            report = checked_text(mutation.source, name, device, limits, nproc, start.beside)
            if shows(bug, report):
                return bug, mutation, report
        why = symptom(bug, report) if report.verdict.ran else unfinished(report, limits)
        if not at_random:
            plural = "s" if len(sites) > 1 else ""
            raise KataError(f"`{bug.id}` was planted at {len(sites)} site{plural} of {name} but kata check could not "
                            f"see its symptom at any ({why}); try another bug, or --no-verify")
        tried.append(f"{bug.id}: {why}")
    raise KataError(f"none of the bugs that fit {name} showed its symptom under kata check ("
                    f"{'; '.join(tried) or 'none left'}); pick one with --bug to see why, or use --no-verify")


def unfinished(report: Report, limits) -> str:
    """Why a planted run was not judged; a timeout says what the time limit was."""
    if report.verdict != "timeout":
        return report.problem
    return (f"the planted script did not finish within {limits.timeout:.0f} s (it may take five times the correct "
            f"script's time, at least {PLANTED_FLOOR:.0f} s, at most --timeout)")


def observed(start: Start, planted: str, bug: Bug, device: str, limits, nproc: int = 1) -> Observation:
    """What the kata's run shows beside the correct script's: both run under `kata check` side by side, the
    correct script's only when its run is not cached."""
    from concurrent.futures import ThreadPoolExecutor

    from katas.observation import Measured, cached, describe, remember

    name = start.path.name
    correct = cached(start.text, device, nproc)
    click.echo(f"Running {name} with its bug" + (" and without it" if correct is None else "") + " under kata check ...",
               err=True)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(checked_text, start.text, name, device, limits, nproc, start.beside) if correct is None else None
        kata = Measured.of(checked_text(planted, name, device, limits if correct is None else
                                        planted_limits(limits, correct.seconds), nproc, start.beside))
        if running is not None:
            report = running.result()
            if not report.verdict.ran:
                raise KataError(f"kata check cannot run {name} without its bug: {report.problem}")
            correct = Measured.of(report)
            remember(start.text, device, nproc, correct)
    return describe(kata, correct, bug.difficulty)


def checked(path: Path, device: str, limits, nproc: int = 1, beside: Path | None = None):
    """`kata check`'s report on ``path``, run in a separate process; Ctrl-C ends `kata new` too. ``beside``: the
    folder of the script it was made from, whose modules it imports."""
    from checker.plan import Plan

    report = observe(path, device, limits, nproc=nproc, plan=Plan(imports=str(beside or "")))
    if report.verdict == "interrupted":
        click.echo(f"Interrupted: {report.problem}", err=True)
        sys.exit(report.exit_code)
    return report


def checked_text(text: str, name: str, device: str, limits, nproc: int = 1, beside: Path | None = None):
    """`kata check`'s report on ``text``, run as ``name`` from a temporary folder, importing the modules ``beside``
    it (the folder of your own script it was made from) as that script does."""
    with tempfile.TemporaryDirectory(prefix="kata-new-") as scratch:
        copy = Path(scratch) / name
        copy.write_text(text)
        return checked(copy, device, limits, nproc, beside)



def shows(bug, report) -> bool:
    """Whether the planted script's run shows the bug's symptom: one of its probes fails, or advises where its
    advice is the symptom (probes that only ever advise: wasted padding, graphs nobody uses; raw units into a layer
    normalised straight after). Other advice from a probe that can fail says the symptom did not show in this run
    (a clip after the step whose value is never reached)."""
    from checker.findings import ADVICE, ERROR, FAIL
    from checker.probes import SHOWING_ADVICE

    statuses = report.statuses()
    return any(statuses.get(p) in (FAIL, ERROR) or (statuses.get(p) == ADVICE and p in SHOWING_ADVICE)
               for p in bug.probes)


def symptom(bug, report) -> str:
    """What the check said of the bug's probes: ``clip-order: n/a — gradients are not clipped``."""
    said = [f"{f.probe}: {f.status}" + (f" — {f.message}" if f.message else "")
            for f in report.findings if f.probe in bug.probes]
    return "; ".join(said) or report.problem


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the catalogue as JSON.")
def bugs(as_json: bool) -> None:
    """List the bugs you can practise on, and the reference scripts each applies to (not inside an interview task)."""
    from katas.bugs import BUGS
    from katas.catalogue import DIFFICULTIES, difficulty_shown
    from katas.docs import bug_rows

    refuse_in_task("kata bugs")
    rows = bug_rows()
    if as_json:
        click.echo(json.dumps({"schema": "torch-katas/bugs/1", "bugs": rows, "difficulties": DIFFICULTIES}, indent=2))
        return
    from rich.table import Table

    from katas.render import make_console

    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("id", "title", "difficulty", "probes", "applies to"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["id"], row["title"], difficulty_shown(BUGS[row["id"]]), ", ".join(row["probes"]),
                      ", ".join(row["references"]))
    console = make_console()
    console.print(table)
    console.print()
    for level, meaning in DIFFICULTIES.items():
        console.print(f"[bold]{level}[/]: {meaning}.", highlight=False)
    console.print("Difficulties are measured on the references (`kata new` measures each kata's own).", highlight=False)
    console.print("\nPractise one with [bold]kata new --bug ID[/], or let chance pick with [bold]kata new[/].")


