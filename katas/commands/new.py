"""`kata new` and `kata bugs`: planting bugs, and the catalogue."""
from __future__ import annotations

import json
import random
import secrets
import shlex
import sys
import tempfile
from pathlib import Path

import click

from katas.commands.common import KataError, limits_of, observe, pick_reference, references, run_options


@click.command()
@click.option("--bug", "bug_id", metavar="ID", help="The bug to plant (see `kata bugs`). Default: a random one, kept secret.")
@click.option("--ref", "ref", metavar="NAME", help="Reference script to start from (see `kata bugs`).")
@click.option("--from", "source_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plant the bug in your own training script instead.")
@click.option("--seed", type=int, help="Makes the choice of bug and site reproducible (default: random, recorded).")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("broken"),
              show_default=True, help="Where katas are written.")
@click.option("--number", type=click.IntRange(min=1), help="Write DIR/NN.py instead of the next free number.")
@click.option("--force", is_flag=True, help="With --number: replace an existing file, keeping a backup in DIR/.kata/backup.")
@click.option("--no-verify", is_flag=True,
              help="With --from: do not run your script under `kata check` to make sure the planted bug shows "
                   "(faster, but the kata may then not show its bug).")
@run_options
def new(bug_id: str | None, ref: str | None, source_path: Path | None, seed: int | None, folder: Path,
        number: int | None, force: bool, no_verify: bool, device: str, timeout: float, idle: float,
        memory: float | None) -> None:
    """Plant a known bug in a correct training script and write it as DIR/NN.py.

    The bug is planted by a structure-aware rewrite (libcst), at a place found by
    what the code does, not by line numbers. You are told what you would observe
    when the script runs, never what is wrong, and the command that checks your fix.

    With --from, your script is first run under `kata check` as it is, then with
    the bug planted (in a temporary copy) until a place is found where the check
    sees the bug's symptom; --device, --timeout, --idle and --memory apply to
    these runs. Your script is never modified.

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
    order = seeded_order(options, seed)
    bug, path, label, ctx = options[0] if bug_id and not source_path and not ref else order[0]
    if source_path and not no_verify:
        bug, mutation = plant_verified([(b, c) for b, _, _, c in order], path, seed, not bug_id, device,
                                       limits_of(timeout, idle, memory))
    else:
        mutation = inject(bug, ctx, seed, path.name)
    if number is None:
        target = create_numbered(folder, mutation.source)
        backup = None
    else:
        target = folder / f"{number:02d}.py"
        backup = replace_with_backup(target, mutation.source)
    write_metadata(target, KataInfo(ENGINE_VERSION, bug.id, mutation.site, label, seed))

    from rich.padding import Padding

    from katas.render import make_console

    console = make_console()
    origin = str(source_path) if source_path else f"the {label} reference"
    console.print(f"Wrote [bold]{target}[/] from {origin} (seed {seed})" + (f", bug [bold]{bug.id}[/]" if bug_id else ""))
    if backup:
        console.print(f"The previous {target.name} is saved as {backup}.")
    if mutation.guessed:
        console.print("[yellow]The bug's site was found through a conventional name (e.g. `optimizer`), not by structure.[/]")
    if source_path:
        console.print("[yellow]Not verified (--no-verify): the kata may not show its bug.[/]" if no_verify else
                      "Verified: `kata check` sees the bug's symptom in it.")
    console.print("\n[bold]What you would observe[/]")
    console.print(Padding(bug.observe, (0, 0, 1, 2), expand=False))
    console.print(f"Find the cause and fix it in {target}, then check your fix:")
    console.print(Padding(f"[bold]kata check {shlex.quote(str(target))}[/]", (0, 0, 0, 2), expand=False))
    if target.parent == Path("broken"):
        console.print(f"(or re-check on every save: [bold]kata watch {target.stem}[/]; "
                      f"stuck? [bold]kata hint {target.stem}[/])")


def seeded_order(options: list, seed: int) -> list:
    """``options`` in the order the seed tries them: the seed's pick first, then the rest shuffled."""
    rng = random.Random(seed)
    first = rng.choice(options)
    rest = [o for o in options if o is not first]
    rng.shuffle(rest)
    return [first, *rest]


def plant_verified(options: list, path: Path, seed: int, at_random: bool, device: str, limits):
    """(bug, mutation) for the first bug of ``options`` (pairs of a bug and the script's Context), and the first of
    its sites in the seed's order, where `kata check` sees the bug's symptom; planted in a temporary copy."""
    from katas.engine.inject import inject, ordered_sites

    name = path.name
    click.echo(f"Checking {name} as it is ...", err=True)
    baseline = checked(path, device, limits)
    if baseline.verdict not in ("pass", "fail"):
        raise KataError(f"kata check cannot run {name}: {baseline.problem}")
    tried = []
    for bug, ctx in options:
        if bug.status(baseline.statuses()) == "still present":
            if not at_random:
                raise KataError(f"{name} already shows the symptom of `{bug.id}` before any bug is planted "
                                f"({symptom(bug, baseline)})")
            continue
        sites = ordered_sites(bug, ctx, seed)
        with tempfile.TemporaryDirectory(prefix="kata-new-") as scratch:
            candidate = Path(scratch) / name
            for i, site in enumerate(sites, 1):
                click.echo(f"Checking that the bug shows when {name} runs (site {i} of {len(sites)}) ...", err=True)
                mutation = inject(bug, ctx, seed, name, site.id)
                candidate.write_text(mutation.source)
                report = checked(candidate, device, limits)
                if bug.status(report.statuses()) == "still present":
                    return bug, mutation
        if not at_random:
            plural = "s" if len(sites) > 1 else ""
            raise KataError(f"`{bug.id}` was planted at {len(sites)} site{plural} of {name} but kata check could not "
                            f"see its symptom at any ({symptom(bug, report)}); try another bug, or --no-verify")
        tried.append(bug.id)
    raise KataError(f"none of the bugs that fit {name} ({', '.join(tried) or 'none left'}) showed its symptom under "
                    "kata check; pick one with --bug to see why, or use --no-verify")


def checked(path: Path, device: str, limits):
    """`kata check`'s report on ``path``, run in a separate process; Ctrl-C ends `kata new` too."""
    report = observe(path, device, limits)
    if report.verdict == "interrupted":
        click.echo(f"Interrupted: {report.problem}", err=True)
        sys.exit(report.exit_code)
    return report


def symptom(bug, report) -> str:
    """What the check said of the bug's probes: ``clip-order: n/a — gradients are not clipped``."""
    said = [f"{f.probe}: {f.status}" + (f" — {f.message}" if f.message else "")
            for f in report.findings if f.probe in bug.probes]
    return "; ".join(said) or report.problem


@click.command()
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


