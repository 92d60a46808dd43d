"""Planting a bug: pick one of its sites with the seed, rewrite it, check the result is still Python."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Site
from katas.engine.patterns import unreachable

ENGINE_VERSION = 2


class NoSite(ValueError):
    """The bug does not apply to this script."""


@dataclass(frozen=True)
class Mutation:
    bug: str
    site: str
    seed: int
    source: str
    guessed: bool  # the site was found through a conventional name, not by structure


def sites(bug: Bug, ctx: Context) -> list[Site]:
    """The bug's sites that can run, sorted by id; a repeated id gets ``#2``, ``#3`` ... in source order."""
    seen: dict[str, int] = {}
    unique = []
    for site in bug.operator.sites(ctx):
        if unreachable(ctx, site.node):
            continue
        seen[site.id] = seen.get(site.id, 0) + 1
        unique.append(site if seen[site.id] == 1 else replace(site, id=f"{site.id}#{seen[site.id]}"))
    return sorted(unique, key=lambda s: s.id)


def ordered_sites(bug: Bug, ctx: Context, seed: int) -> list[Site]:
    """The bug's sites in the order the seed tries them; ``inject`` plants at the first unless told otherwise."""
    found = sites(bug, ctx)
    if not found:
        return []
    rng = random.Random(f"{bug.id}:{seed}")
    first = rng.choice(found)
    rest = [s for s in found if s is not first]
    rng.shuffle(rest)
    return [first, *rest]


def inject(bug: Bug, source: str | Context, seed: int, name: str = "the script", site: str | None = None) -> Mutation:
    """Plant ``bug`` at the site the seed picks, or at the site with id ``site``.

    Pass a Context to plant several bugs in one parsed script.
    """
    ctx = source if isinstance(source, Context) else Context.of(source)
    order = ordered_sites(bug, ctx, seed)
    if not order:
        raise NoSite(f"`{bug.id}` does not apply to {name}: {bug.operator.no_site}")
    chosen = order[0] if site is None else next((s for s in order if s.id == site), None)
    if chosen is None:
        raise NoSite(f"`{bug.id}` has no site `{site}` in {name}")
    mutated = bug.operator.mutate(ctx, chosen).code
    compile(mutated, name, "exec")
    return Mutation(bug.id, chosen.id, seed, mutated, chosen.guessed)
