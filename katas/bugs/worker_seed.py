"""worker-seed: the per-worker seeding of the dataset's own generator is removed."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import LOADER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, method, names

SEEDING = {"manual_seed", "seed"}
PROCESS_WIDE = {"torch", "random", "numpy.random", "torch.random", "torch.cuda"}


class DropWorkerSeeding(Operator):
    """Drop ``worker_init_fn=`` from a DataLoader whose init function seeds (or replaces) a generator the dataset
    owns (its own, a transform's ...), not only the process-wide ones PyTorch re-seeds by itself."""

    no_site = "no DataLoader has a worker_init_fn that seeds the dataset's own generator"

    def seeding_function(self, ctx: Context, name: str) -> cst.FunctionDef | None:
        function = ctx.functions.get(name)
        if function is None:
            return None
        seeds = [c for c in ctx.calls(function) if method(c) in SEEDING and not self.process_wide(ctx, c.func.value)]
        replaced = [a for a in find(function, cst.Assign) if any(names(t.target, "dataset") for t in a.targets)]
        return function if seeds or replaced else None

    @staticmethod
    def process_wide(ctx: Context, receiver: cst.BaseExpression) -> bool:
        """``torch``, ``random``, ``np.random``: generators PyTorch re-seeds in every worker by itself."""
        return bool(ctx.qualified_names(receiver) & PROCESS_WIDE)

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for call in ctx.all(cst.Call):
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "worker_init_fn"
                        and isinstance(a.value, cst.Name)), None)
            if arg is not None and ctx.constructed(call) == LOADER and self.seeding_function(ctx, arg.value.value):
                sites.append(Site(f"worker-seed:{ctx.where(call)}:worker_init_fn={arg.value.value}", arg))
        return sites

    def mutate(self, ctx: Context, site: Site):
        name = site.node.value.value
        call = ctx.parents[site.node]
        edits = {call: lambda updated: without_arg(updated, call.args.index(site.node))}
        uses = [n for n in ctx.all(cst.Name) if n.value == name and n is not site.node.value]
        function = ctx.functions[name]
        if all(n is function.name for n in uses):  # the init function is not used elsewhere: remove it too
            edits[function] = lambda _: cst.RemoveFromParent()
        return drop_unused_imports(ctx.module, rewrite(ctx.module, edits))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import DataLoader, get_worker_info


def reseed(worker_id):
    get_worker_info().dataset.rng.manual_seed(get_worker_info().seed)


loader = DataLoader(data, batch_size=32, num_workers=4, worker_init_fn=reseed)
""",
            after="""\
from torch.utils.data import DataLoader


loader = DataLoader(data, batch_size=32, num_workers=4)
""")]


def without_arg(call: cst.Call, index: int) -> cst.Call:
    args = list(call.args)
    removed = args.pop(index)
    if args and index == len(args):  # the last argument went: the new last one takes its trailing comma
        args[-1] = args[-1].with_changes(comma=removed.comma)
    return call.with_changes(args=args)


def name_counts(module: cst.Module) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in names(module):
        counts[n.value] = counts.get(n.value, 0) + 1
    return counts


def drop_unused_imports(before: cst.Module, after: cst.Module) -> cst.Module:
    """Remove ``from x import name`` entries that the edit from ``before`` to ``after`` left unused."""
    was, now = name_counts(before), name_counts(after)
    orphaned = {name for name, count in now.items() if count == 1 and was.get(name, 0) > 1}

    class Dropper(cst.CSTTransformer):
        def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
            if isinstance(updated.names, cst.ImportStar):
                return updated
            keep = [a for a in updated.names if not (a.asname is None and isinstance(a.name, cst.Name)
                                                     and a.name.value in orphaned)]
            if len(keep) == len(updated.names):
                return updated
            if not keep:
                return cst.RemoveFromParent()
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=keep)

    return after.visit(Dropper())


BUG = Bug(
    id="worker-seed",
    title="DataLoader workers replay one augmentation stream",
    difficulty="hard",
    observe=("Augmentation looks less varied than it should: the same random jitter shows up in samples "
             "served by different workers, and every epoch repeats the previous epoch's noise."),
    hints=(
        "Log the first random number the augmentation draws in each worker, for two epochs.",
        "Each worker is a copy of the main process, including the dataset and everything it owns.",
        "PyTorch re-seeds torch, random and NumPy's global generator in each worker, but not a generator the "
        "dataset created itself.",
    ),
    why=("DataLoader workers are forked copies of the main process. A generator object created in the dataset's "
         "__init__ is copied with the same state into every worker, and, with non-persistent workers, again "
         "every epoch, so all of them draw the same numbers."),
    fix=("Seed the dataset's generator in a `worker_init_fn` from `torch.utils.data.get_worker_info().seed` "
         "(or `torch.initial_seed()`), which differs per worker and per epoch; or draw from the global RNG."),
    probes=("worker-rng",),
    follow_up=(
        "Why is seeding from the worker id alone not enough?",
        "What changes with persistent_workers=True?",
        "How do you keep augmentation reproducible across runs and still distinct across workers?",
    ),
    operator=DropWorkerSeeding(),
)
