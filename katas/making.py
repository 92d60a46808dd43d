"""Making a kata: the correct script a bug is planted into (a reference or your own, disguised or plain), where
each bug fits, and the kata as `kata new` wrote it, regenerated from its metadata. `kata new` and the learner's
commands (`kata solution`, `kata reset`) both read it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import click

from katas.commands.common import KataError, reference_source

if TYPE_CHECKING:
    from katas.catalogue import Bug
    from katas.engine.context import Context
    from katas.workspace import KataInfo

NEUTRAL = "A PyTorch training script."  # the docstring of your own script, disguised


@dataclass(frozen=True)
class Start:
    """A correct script as a bug is planted into it: disguised with the seed, unless ``plain``."""

    path: Path
    label: str  # what the kata records as its reference: a reference's name, or the path of your script
    text: str
    plain: bool
    ctx: Context

    @property
    def beside(self) -> Path | None:
        """The folder of your own script (``--from``), whose modules its planted copies import; None for a
        reference."""
        label = Path(self.label)
        return label.parent if label.is_absolute() else None


def starting_text(source: str, label: str, seed: int, plain: bool) -> str:
    """The correct script a bug is planted into: ``source`` disguised with the seed, or as it is when ``plain``.

    The disguise renames, reorders and rewrites without changing what the script does, drops every comment
    and docstring, and gives it a neutral docstring, so that neither a diff nor a comment points at the bug.
    """
    if plain:
        return source
    from katas.interview.disguise import disguise
    from katas.interview.names import DESCRIPTIONS

    description = random.Random(f"kata:{seed}").choice(DESCRIPTIONS.get(label, (NEUTRAL,)))
    return disguise(source, seed, description)


def read_start(path: Path, label: str, seed: int, plain: bool) -> Start:
    import libcst as cst

    from katas.engine.context import Context

    try:
        text = starting_text(path.read_text(), label, seed, plain)
        return Start(path, label, text, plain, Context.of(text))
    except (cst.ParserSyntaxError, UnicodeDecodeError) as exc:
        raise KataError(f"cannot read {path} as Python: {exc}") from None


def regenerate(info: KataInfo) -> tuple[str, str]:
    """(the correct script, the kata as `kata new` wrote it), from a kata's metadata."""
    from katas.bugs import BUGS
    from katas.engine.inject import inject

    correct = starting_text(reference_source(info), info.reference, info.seed, info.plain)
    return correct, inject(BUGS[info.bug], correct, info.seed, site=info.site).source


def applicable(bugs: list[Bug], scripts: list[tuple[Path, str]], seed: int) -> Iterator[tuple[Bug, Start]]:
    """Each (bug, script as written) where the bug has a site, in a fixed order, reading scripts only as
    they are needed; when there is none, an error that says so: that the scripts have no training loop, else for
    each bug what they lack."""
    from katas.engine.inject import sites

    found, read = False, []
    for path, label in scripts:
        written = read_start(path, label, seed, plain=True)
        read.append(written)
        for bug in bugs:
            if sites(bug, written.ctx):
                found = True
                yield bug, written
    if found:
        return
    where = " or ".join(path.name for path, _ in scripts)
    if not any(start.ctx.training_loops() for start in read):
        raise KataError(f"no training loop found in {where}: a bug is planted into a training script, with a for or "
                        "while loop whose steps call .backward() (in the loop, or in a function of the script it calls)")
    if len(bugs) == 1:
        raise KataError(f"`{bugs[0].id}` does not apply to {where}: {bugs[0].operator.no_site}")
    width = max(len(b.id) for b in bugs)
    raise KataError(f"no bug applies to {where}:\n" + "\n".join(f"  {b.id:<{width}}  {b.operator.no_site}" for b in bugs))


def first_fit(order: list[tuple[Bug, Start]], seed: int, plain: bool) -> tuple[Bug, Start]:
    """The first (bug, script) of ``order`` whose bug has a site in the script as it is planted into.

    Only your own script can lose every site to its disguise (a role found by a conventional name that the
    disguise renamed): then the bug goes into its own text, and `kata new` says so.
    """
    from katas.engine.inject import sites

    if plain:
        return order[0]
    disguised: dict[Path, Start] = {}
    for bug, written in order:
        if written.path not in disguised:
            disguised[written.path] = read_start(written.path, written.label, seed, plain=False)
        if sites(bug, disguised[written.path].ctx):
            return bug, disguised[written.path]
    bug, written = order[0]
    click.echo(f"Kept {written.path.name}'s own text: disguising it hid where the bug goes.", err=True)
    return bug, written


def seeded_order(options: list, seed: int) -> list:
    """``options`` in the order the seed tries them: the seed's pick first, then the rest shuffled."""
    rng = random.Random(seed)
    first = rng.choice(options)
    rest = [o for o in options if o is not first]
    rng.shuffle(rest)
    return [first, *rest]
