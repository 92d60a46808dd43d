"""ddp-set-epoch: the DistributedSampler is never told the epoch, so every epoch deals each rank the same shard in
the same order."""
from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from katas.bugs.no_shuffle import holders, targets
from katas.bugs.softmax_ce import callees
from katas.catalogue import Bug
from katas.engine.context import KEEPS_ROLE, LOADER, Context
from katas.engine.operator import Example, Operator, Site, removal_edits, rewrite
from katas.engine.patterns import call_statement
from katas.engine.tree import method

DISTRIBUTED_SAMPLER = {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
SAMPLER_NAME = re.compile(r"sampler$")


def assigned(ctx: Context) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) of every assignment: ``a, b = x, y`` pairs its elements."""
    pairs = []
    for node in [*ctx.all(cst.Assign), *ctx.all(cst.AnnAssign)]:
        if node.value is None:
            continue
        for target in [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]:
            value = node.value
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) \
                    and len(target.elements) == len(value.elements):
                pairs += [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
            else:
                pairs += [(t, value) for t in targets(target)]
    return pairs


def held(ctx: Context, source: Callable[[cst.BaseExpression], bool]) -> set:
    """Binding keys of the names and ``self`` attributes that hold a value ``source`` accepts: assigned it (or
    another holder, or ``holder.to(...)``), or given it as an argument for a parameter of the file's own
    functions."""
    keys: set = set()

    def holds(value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call) and method(value) in KEEPS_ROLE:
            value = value.func.value
        return source(value) or isinstance(value, (cst.Name, cst.Attribute)) and ctx.binding(value) in keys

    pairs = assigned(ctx)
    calls = [(c, callee, offset) for c in ctx.all(cst.Call) for callee, offset in callees(ctx, c)]
    for _ in range(10):
        before = set(keys)
        keys |= {key for target, value in pairs if holds(value) and (key := ctx.binding(target)) is not None}
        for call, callee, offset in calls:
            params = callee.params
            positional = [*params.posonly_params, *params.params][offset:]
            for i, arg in enumerate(call.args):
                if arg.star or not holds(arg.value):
                    continue
                if arg.keyword is not None:
                    param = next((p for p in [*positional, *params.kwonly_params]
                                  if p.name.value == arg.keyword.value), None)
                else:
                    param = positional[i] if i < len(positional) else None
                if param is not None and (key := ctx.binding(param.name)) is not None:
                    keys.add(key)
        if keys == before:
            break
    return keys


def built(ctx: Context, *classes: str) -> Callable[[cst.BaseExpression], bool]:
    """Whether a value is an instance of one of ``classes`` built there."""
    return lambda value: isinstance(value, cst.Call) and ctx.is_call_to(value, *classes)


def samplers(ctx: Context) -> set:
    """Binding keys of what holds a DistributedSampler."""
    return held(ctx, built(ctx, *DISTRIBUTED_SAMPLER))


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def distributed_loaders(ctx: Context, keys: set) -> list[tuple[cst.Call, cst.Arg]]:
    """(DataLoader call, its ``sampler=`` argument) where that argument builds a DistributedSampler or holds one
    (``keys``)."""
    is_sampler = built(ctx, *DISTRIBUTED_SAMPLER)
    found = []
    for call in ctx.all(cst.Call):
        arg = keyword(call, "sampler") if ctx.constructed(call) == LOADER else None
        if arg is not None and (is_sampler(arg.value) or ctx.binding(arg.value) in keys):
            found.append((call, arg))
    return found


def alone_under_if(ctx: Context, statement: cst.CSTNode) -> cst.CSTNode:
    """The ``if`` (without ``else``) whose body is ``statement`` alone, else ``statement``: removing a line should
    not leave ``if args.distributed: pass`` behind."""
    block = ctx.parents.get(statement)
    guard = ctx.parents.get(block)
    if isinstance(guard, cst.If) and guard.body is block and guard.orelse is None and len(block.body) == 1 \
            and not isinstance(ctx.parents.get(guard), cst.If):
        return guard
    return statement


class ForgetSetEpoch(Operator):
    """Delete a ``sampler.set_epoch(epoch)`` line (with the ``if`` that guards it alone): on a name or ``self``
    attribute that holds a DistributedSampler (followed through assignments and calls into the file's own
    functions), or on ``loader.sampler`` of a DataLoader built with one. In a file that builds a DistributedSampler
    the operator cannot follow there, ``loader.sampler`` or a name ending in ``sampler`` is a guess."""

    no_site = "it never calls set_epoch() on a DistributedSampler"

    def sites(self, ctx: Context) -> list[Site]:
        keys = samplers(ctx)
        loaders = {key for call, _ in distributed_loaders(ctx, keys) for key in holders(ctx, call)}
        builds = any(map(built(ctx, *DISTRIBUTED_SAMPLER), ctx.all(cst.Call)))
        found = []
        for call in ctx.calls(ctx.module, "set_epoch"):
            statement = ctx.statement(call)
            receiver = call.func.value
            if call_statement(statement) is not call or not isinstance(receiver, (cst.Name, cst.Attribute)):
                continue
            through_loader = isinstance(receiver, cst.Attribute) and receiver.attr.value == "sampler"
            if ctx.binding(receiver) in keys or through_loader and ctx.binding(receiver.value) in loaders:
                guessed = False
            elif builds and (through_loader or SAMPLER_NAME.search(ctx.code(receiver))):
                guessed = True
            else:
                continue
            found.append(Site(f"ddp-set-epoch:{ctx.where(statement)}:{ctx.code(statement)}", statement, guessed))
        return found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        return rewrite(ctx.module, removal_edits(ctx, [alone_under_if(ctx, site.node)], end_comments=True))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    train_one_epoch(model, loader, optimizer)
""",
            after="""\
from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(train_set, shuffle=True)
loader = DataLoader(train_set, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
"""), Example(
            before="""\
from torch.utils.data import DataLoader, DistributedSampler


def fit(train_loader, epochs):
    for epoch in range(epochs):
        if isinstance(train_loader.sampler, DistributedSampler):
            train_loader.sampler.set_epoch(epoch)
        run_epoch(train_loader)


fit(DataLoader(data, batch_size=32, sampler=DistributedSampler(data)), epochs=10)
""",
            after="""\
from torch.utils.data import DataLoader, DistributedSampler


def fit(train_loader, epochs):
    for epoch in range(epochs):
        run_epoch(train_loader)


fit(DataLoader(data, batch_size=32, sampler=DistributedSampler(data)), epochs=10)
""")]


BUG = Bug(
    id="ddp-set-epoch",
    title="Every epoch deals each rank the same shard in the same order",
    difficulty="hard",
    observe=("Under `torchrun --nproc-per-node 2` training runs and the printed accuracy climbs as it should. "
             "Logged batch by batch, each rank's training loss retraces the same jagged curve every epoch, spike "
             "for spike, as if the epochs were copies of one another."),
    hints=(
        "On each rank, print the first few sample indices of the first batch in two different epochs. Do they change?",
        "A DistributedSampler draws its permutation from a seed. What does it mix into that seed, and who updates it?",
        "Look at what the epoch loop tells the training sampler before each epoch starts.",
    ),
    why=("A DistributedSampler shuffles with a generator seeded from `seed + epoch`, and it only learns the epoch "
         "from `set_epoch(epoch)`. Without that call the epoch stays 0: every epoch uses the same permutation, so "
         "each rank gets the same shard in the same order every time. The gradient noise repeats instead of "
         "averaging out, and no rank ever sees the samples that were dealt to another."),
    fix=("Call `sampler.set_epoch(epoch)` on the training DistributedSampler at the start of every epoch, before "
         "iterating the loader (not `set_epoch(0)`, and not only once)."),
    probes=("epoch-order", "rank-shards"),
    follow_up=(
        "Why does a DistributedSampler need the epoch at all, when a plain shuffled DataLoader does not?",
        "Every rank must draw the same permutation. How does the sampler guarantee that, and what breaks if one "
        "rank's seed differs?",
        "What does `drop_last` change for a DistributedSampler when the dataset does not divide by the world size?",
    ),
    operator=ForgetSetEpoch(),
)
