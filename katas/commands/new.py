"""`kata new` and `kata bugs`: planting bugs, and the catalogue."""
from __future__ import annotations

import json
import random
import secrets
import shlex
from pathlib import Path

import click

from katas.commands.common import KataError, pick_reference, references


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

    from rich.padding import Padding

    from katas.render import make_console

    console = make_console()
    origin = str(source_path) if source_path else f"the {label} reference"
    console.print(f"Wrote [bold]{target}[/] from {origin} (seed {seed})" + (f", bug [bold]{bug.id}[/]" if bug_id else ""))
    if backup:
        console.print(f"The previous {target.name} is saved as {backup}.")
    if mutation.guessed:
        console.print("[yellow]The bug's site was found through a conventional name (e.g. `optimizer`), not by structure.[/]")
    console.print("\n[bold]What you would observe[/]")
    console.print(Padding(bug.observe, (0, 0, 1, 2), expand=False))
    console.print(f"Find the cause and fix it in {target}, then check your fix:")
    console.print(Padding(f"[bold]kata check {shlex.quote(str(target))}[/]", (0, 0, 0, 2), expand=False))
    if target.parent == Path("broken"):
        console.print(f"(or re-check on every save: [bold]kata watch {target.stem}[/]; "
                      f"stuck? [bold]kata hint {target.stem}[/])")


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


