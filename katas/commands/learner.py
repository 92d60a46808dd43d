"""The learner's loop: init, status, list, hint, explain, solution, reset."""
from __future__ import annotations

import difflib
import json
import shlex
from pathlib import Path

import click

from katas.commands.common import KataError, reference_source
from katas.state import PASSED, PENDING, Progress, home, load, updating
from katas.terminal import columns, wrap
from katas.workspace import (
    META_DIR,
    KataInfo,
    default_workspace,
    find_examples,
    find_workspace,
    is_examples,
    metadata_path,
    numbers,
    read_metadata,
    replace_with_backup,
    start_workspace,
)


def kata_dir(folder: Path | None) -> Path | None:
    """The kata folder: ``folder`` when given, else the nearest workspace here or above (None if there is none)."""
    return folder if folder is not None else find_workspace()


def complete_kata(ctx, param, incomplete: str):
    """Shell completion: kata numbers in the kata folder (--dir, or the one found from here)."""
    folder = kata_dir(ctx.params.get("folder") if ctx else None)
    return [f"{n:02d}" for n in numbers(folder) if f"{n:02d}".startswith(incomplete)] if folder else []


def complete_bug(ctx, param, incomplete: str):
    from katas.bugs import BUGS

    return [bug_id for bug_id in BUGS if bug_id.startswith(incomplete)]


KATA_ARGUMENT = click.argument("kata", metavar="KATA", shell_complete=complete_kata)
DIR_OPTION = click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
                          help="The kata folder (default: your workspace, the nearest one here or above; "
                               "--dir broken for the shipped examples).")


def kata_path(kata: str, folder: Path | None) -> Path:
    """``03`` means NN.py in the kata folder; anything else is a path."""
    if not kata.isdigit():
        return Path(kata)
    found = kata_dir(folder)
    if found is None:
        raise KataError("no workspace here or above; `kata new` starts one with your first kata, or name a kata "
                        f"folder with --dir{examples_hint()}")
    return found / f"{int(kata):02d}.py"


def resolve(kata: str, folder: Path | None) -> tuple[Path, KataInfo]:
    """A kata file and its metadata; a clear error otherwise."""
    from katas.bugs import BUGS

    path = kata_path(kata, folder)
    if not path.is_file():
        raise KataError(f"no kata {path}; `kata list` shows the katas you have")
    info = read_metadata(path)
    if info is None and metadata_path(path).is_file():
        raise KataError(f"cannot read {metadata_path(path)} (damaged, or written by another version of torch-katas)")
    if info is None:
        raise KataError(f"{path} was not made by `kata new` (no metadata in {path.parent / '.kata'})")
    if info.bug not in BUGS:
        raise KataError(f"{path} was made by another version of torch-katas, with a bug this one does not know; "
                        "make a new kata with `kata new`")
    return path, info


def dir_flag(folder: Path) -> str:
    """`` --dir FOLDER`` when commands run from here would not find ``folder`` by themselves; else nothing."""
    found = find_workspace()
    return "" if found is not None and found.resolve() == folder.resolve() else f" --dir {shlex.quote(str(folder))}"


def next_command(katas: list[tuple[Path, Progress]], folder: Path | None) -> str:
    """The command to run next: the kata in progress (failing) first, then the first one not started."""
    flag = dir_flag(folder) if folder else ""
    todo = sorted(((path, p) for path, p in katas if p.status != PASSED), key=lambda k: k[1].status == PENDING)
    if not katas:
        return f"No katas yet. Start with: kata new{flag}"
    if not todo:
        return f"Every kata passes. Make a new one: kata new{flag}"
    path, progress = todo[0]
    stuck = f"   (stuck? kata hint {path.stem}{flag})" if progress.status != PENDING else ""
    return f"Next: fix {path}, then run: kata check {shlex.quote(str(path))}{stuck}"


def katas_in(folder: Path | None) -> list[tuple[Path, Progress]]:
    if folder is None:
        return []
    progress = load(folder)
    return [(folder / f"{n:02d}.py", progress.get(f"{n:02d}", Progress())) for n in numbers(folder)]


def examples_hint() -> str:
    """`` (the ready-made examples: --dir broken)`` where shipped examples are found from here."""
    examples = find_examples()
    return f" (the ready-made examples: --dir {shlex.quote(str(examples))})" if examples else ""


def show_status(folder: Path | None = None) -> None:
    """`kata` with no command: where you are and what to run next. Reads only; creates nothing."""
    from katas.render import make_console

    console = make_console()
    folder = kata_dir(folder)
    katas = katas_in(folder)
    passed = sum(p.status == PASSED for _, p in katas)
    if katas:
        plural = "s" if len(katas) != 1 else ""
        console.print(f"[bold]{folder}/[/]: {len(katas)} kata{plural}, {passed} passed, {len(katas) - passed} to go")
    if folder is None:
        console.print(f"No workspace yet: `kata new` starts one, {default_workspace()}/, with your first kata "
                      "(or `kata init DIR` for another folder).")
        examples = find_examples()
        if examples is not None:
            where = "This folder" if examples == Path() else f"{examples}/"
            console.print(f"{where} holds {len(numbers(examples))} ready-made examples to check: "
                          f"kata check {shlex.quote(str(examples / '01.py'))}")
        return
    console.print(next_command(katas, folder))


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
def init(folder: Path | None) -> None:
    """Start your workspace in FOLDER (default: practice/, beside the shipped examples when you are in a clone).

    Your katas (`kata new`) and your progress, on them and on the shipped
    examples in broken/, live there; the learner commands find it from any
    folder below the one that holds it, as git finds a repository.
    """
    folder = folder or default_workspace()
    if start_workspace(folder):
        click.echo(f"Started your workspace {folder}/. Make your first kata: kata new{dir_flag(folder)}")
    else:
        click.echo(f"{folder}/ is already a workspace; nothing to do. Next: kata new{dir_flag(folder)}")


@click.command("list")
@click.option("--pending", is_flag=True, help="Only katas that do not pass yet.")
@click.option("--done", is_flag=True, help="Only katas that pass.")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@DIR_OPTION
def list_katas(pending: bool, done: bool, as_json: bool, folder: Path | None) -> None:
    """List the katas (in your workspace, or --dir) with their status and the hints used.

    A kata's bug is named only once the kata passes. `+diagnosis` marks a kata
    whose causes `kata check --diagnose` named before it passed (it counts like a hint).
    """
    from katas.bugs import BUGS

    if pending and done:
        raise click.UsageError("--pending and --done exclude each other; without either, every kata is listed")
    folder = kata_dir(folder)
    katas = katas_in(folder)
    rows = []
    for path, progress in katas:
        if (pending and progress.status == PASSED) or (done and progress.status != PASSED):
            continue
        info = read_metadata(path)
        bug = BUGS[info.bug].title if info and progress.status == PASSED and info.bug in BUGS else None
        rows.append({"kata": path.stem, "path": str(path), "status": progress.status, "hints": progress.hints,
                     "diagnosed": progress.diagnosed, "bug": bug})
    if as_json:
        click.echo(json.dumps({"schema": "torch-katas/list/1", "katas": rows}, indent=2))
        return
    from rich.table import Table

    from katas.render import make_console

    table = Table(header_style="bold", box=None, pad_edge=False)
    for column in ("kata", "status", "hints", "bug"):
        table.add_column(column)
    for row in rows:
        style = "green" if row["status"] == PASSED else "red" if row["status"] != PENDING else ""
        hints = f"{row['hints']}/3" + (" +diagnosis" if row["diagnosed"] else "")
        table.add_row(row["kata"], f"[{style}]{row['status']}[/]" if style else row["status"], hints, row["bug"] or "?")
    console = make_console()
    console.print(table if rows else "No katas here.")
    console.print(next_command(katas, folder))


@click.command()
@KATA_ARGUMENT
@click.option("--all", "show_all", is_flag=True, help="All three hints (once the kata passes).")
@DIR_OPTION
def hint(kata: str, show_all: bool, folder: Path | None) -> None:
    """Reveal the next of the kata's three graded hints (KATA: 03, or a path)."""
    from katas.bugs import BUGS

    refuse_in_task("kata hint", Path(kata).parent if not kata.isdigit() else None)
    path, info = resolve(kata, folder)
    named = path.stem + dir_flag(path.parent)
    hints = BUGS[info.bug].hints
    with updating(path.parent) as progress:
        entry = progress.setdefault(path.stem, Progress())
        if show_all and entry.status != PASSED:
            raise KataError(f"--all opens once the kata passes; `kata hint {named}` shows the next hint")
        shown = len(hints) if show_all else min(entry.hints + 1, len(hints))
        fresh = shown > entry.hints
        entry.hints = max(entry.hints, shown)
    said = [f"Hint {n} of {len(hints)}: {hints[n - 1]}" for n in range(1 if show_all else shown, shown + 1)]
    if not fresh and not show_all:
        said.append(f"That was the last hint. Still stuck? kata solution {named} --reveal")
    click.echo(wrap("\n".join(said), columns()))


def refuse_in_task(command: str, folder: Path | None = None) -> None:
    """Inside an interview task's candidate folder (here, or ``folder``) the catalogue does not answer: its pages
    name the causes the candidate is asked to find."""
    from katas.interview.marker import task_folder_around

    if any(task_folder_around(f) for f in (Path.cwd(), folder) if f is not None):
        raise KataError(f"{command} does not answer inside an interview task: the catalogue names causes, and finding "
                        "them is the task. `kata check train.py` reports what the script shows")


@click.command()
@click.argument("bug_id", metavar="BUG", shell_complete=complete_bug)
def explain(bug_id: str) -> None:
    """The catalogue page for a bug: what you observe, why it happens, how to fix it, an example.

    Not inside an interview task's folder, where the causes are what the candidate is asked to find.
    """
    from rich.markdown import Markdown

    from katas.bugs import lookup
    from katas.catalogue import UnknownBug
    from katas.render import make_console

    refuse_in_task("kata explain")
    try:
        bug = lookup(bug_id)
    except UnknownBug as exc:
        raise KataError(str(exc)) from None
    make_console().print(Markdown(explain_page(bug)))


def explain_page(bug) -> str:
    """`kata explain`'s page for ``bug`` (a katas.catalogue.Bug), as Markdown."""
    example = bug.operator.examples()[0]
    diff = "\n".join(difflib.unified_diff(example.after.splitlines(), example.before.splitlines(), "broken", "fixed",
                                          lineterm=""))
    questions = "\n".join(f"- {q}" for q in bug.follow_up)
    return f"""# {bug.title} (`{bug.id}`, {bug.difficulty})

## What you observe
{bug.observe}

## Why it happens
{bug.why}

## How to fix it
{bug.fix}

## Example
```diff
{diff}
```

## Questions an interviewer asks next
{questions}

`kata check` shows it as: {", ".join(f"`{p}`" for p in bug.probes)}. Practise it: `kata new --bug {bug.id}`.
"""


@click.command()
@KATA_ARGUMENT
@click.option("--reveal", is_flag=True, help="Show it before the kata passes (asks first).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@DIR_OPTION
def solution(kata: str, reveal: bool, yes: bool, folder: Path | None) -> None:
    """Show what separates your file from the correct script, as a diff.

    Shown freely once the kata passes; before that, only with --reveal. The
    correct script is the one the kata was made from, disguised the same way.
    """
    from rich.syntax import Syntax

    from katas.making import starting_text
    from katas.render import make_console

    path, info = resolve(kata, folder)
    entry = load(path.parent).get(path.stem, Progress())
    if entry.status != PASSED:
        if not reveal:
            raise KataError(f"the solution opens once {path} passes `kata check`; "
                            f"to see it now: kata solution {path.stem}{dir_flag(path.parent)} --reveal")
        if not yes and not click.confirm(f"Reveal the solution of {path} before it passes?", default=False):
            raise click.Abort()
        with updating(path.parent) as progress:
            progress.setdefault(path.stem, Progress()).revealed = True
    correct = starting_text(reference_source(info), info.reference, info.seed, info.plain)
    diff = "\n".join(difflib.unified_diff(path.read_text().splitlines(), correct.splitlines(),
                                          str(path), f"{info.reference} (correct)", lineterm=""))
    make_console().print(Syntax(diff or "(no difference: your file is the correct script)", "diff"))


@click.command()
@KATA_ARGUMENT
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@DIR_OPTION
def reset(kata: str, yes: bool, folder: Path | None) -> None:
    """Restore a kata to how `kata new` wrote it; your version is kept as a backup."""
    from katas.engine.inject import ENGINE_VERSION, NoSite
    from katas.making import regenerate

    path, info = resolve(kata, folder)
    stale = KataError(f"{path} was made by another version of torch-katas (engine {info.engine}; this one is "
                      f"{ENGINE_VERSION}), which this one cannot rewrite as it was; make a new kata with `kata new`")
    if info.engine != ENGINE_VERSION:
        raise stale
    try:
        original = regenerate(info)[1]
    except NoSite:
        raise stale from None
    if path.read_text() == original:
        click.echo(f"{path} is already as it was written; nothing to reset.")
        return
    if not yes and not click.confirm(f"Reset {path}? Your version is kept as a backup.", default=False):
        raise click.Abort()
    workspace = home(path.parent, start=True)[0] if is_examples(path.parent) else None
    backup = replace_with_backup(path, original, workspace / META_DIR / "backup" / "examples" if workspace else None)
    with updating(path.parent) as progress:
        progress.setdefault(path.stem, Progress()).status = PENDING
    click.echo(f"Reset {path}; your version is in {backup}.")
