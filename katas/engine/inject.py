"""Planting a bug: pick one of its sites with the seed, rewrite it, check the result is still Python."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Site

ENGINE_VERSION = 1


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
    """The bug's sites, sorted by id; a repeated id gets ``#2``, ``#3`` ... in source order."""
    seen: dict[str, int] = {}
    unique = []
    for site in bug.operator.sites(ctx):
        seen[site.id] = seen.get(site.id, 0) + 1
        unique.append(site if seen[site.id] == 1 else replace(site, id=f"{site.id}#{seen[site.id]}"))
    return sorted(unique, key=lambda s: s.id)


def inject(bug: Bug, source: str | Context, seed: int, name: str = "the script") -> Mutation:
    """Plant ``bug`` at the site the seed picks. Pass a Context to plant several bugs in one parsed script."""
    ctx = source if isinstance(source, Context) else Context(source)
    found = sites(bug, ctx)
    if not found:
        raise NoSite(f"`{bug.id}` does not apply to {name}: {bug.operator.no_site}")
    site = random.Random(f"{bug.id}:{seed}").choice(found)
    mutated = bug.operator.mutate(ctx, site).code
    compile(mutated, name, "exec")
    return Mutation(bug.id, site.id, seed, mutated, site.guessed)
