"""no-grouping: the length-grouped batch sampler is replaced by plain shuffling, so batches mix short and long
sequences."""
from __future__ import annotations

import libcst as cst

from katas.bugs.no_shuffle import iterated_by, training_loops
from katas.catalogue import Bug
from katas.engine.context import LOADER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, method

BATCH_SIZE_NAMES = ("batch_size", "bs", "batch")


def sampler_call(ctx: Context, value: cst.BaseExpression) -> cst.Call | None:
    """The call that built a sampler: inline, or the value of the (single) assignment of the name it is passed as."""
    if isinstance(value, cst.Call):
        return value
    key = ctx.binding(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    if key is None:
        return None
    built = [a.value for a in ctx.all(cst.Assign) if isinstance(a.value, cst.Call)
             and any(ctx.binding(t.target) == key for t in a.targets if isinstance(t.target, (cst.Name, cst.Attribute)))]
    return built[0] if len(built) == 1 else None


def groups_by_sorting(ctx: Context, call: cst.Call) -> cst.ClassDef | None:
    """The file's own sampler class that ``call`` instantiates, when its ``__iter__`` sorts (groups by a key)."""
    if not isinstance(call.func, cst.Name):
        return None
    cls = next((c for c in ctx.all(cst.ClassDef) if c.name.value == call.func.value), None)
    if cls is None:
        return None
    iterate = next((f for f in find(cls.body, cst.FunctionDef) if f.name.value == "__iter__"), None)
    if iterate is None:
        return None
    sorts = any(isinstance(c.func, cst.Name) and c.func.value == "sorted" or method(c) in ("sort", "argsort")
                for c in find(iterate, cst.Call))
    return cls if sorts else None


def batch_size_of(ctx: Context, call: cst.Call, cls: cst.ClassDef) -> cst.BaseExpression | None:
    """The argument of ``call`` that the class's ``__init__`` takes as its batch size."""
    init = next((f for f in find(cls.body, cst.FunctionDef) if f.name.value == "__init__"), None)
    if init is None:
        return None
    params = [p.name.value for p in [*init.params.posonly_params, *init.params.params]][1:]  # less self
    name = next((n for n in BATCH_SIZE_NAMES if n in params), None)
    if name is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    index = params.index(name)
    if index < len(positional):
        return positional[index].value
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def portable(ctx: Context, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Whether ``expr`` means the same where ``at`` is: a number, or names bound at module level or in ``at``'s
    function."""
    if isinstance(expr, cst.Integer):
        return True
    scope = ctx.enclosing(at, cst.FunctionDef)
    for name in find(expr, cst.Name):
        if not ctx.is_read(name):
            continue
        key = ctx.binding(name)
        if key is None:
            return False
        defined = ctx.enclosing(name, cst.FunctionDef)
        if defined is not None and defined is not scope:
            return False
    return True


def dataset_of(ctx: Context, call: cst.Call) -> str:
    return next((ctx.code(a.value) for a in call.args if a.keyword is None and not a.star), "")


class ShuffleInsteadOfGrouping(Operator):
    """Replace a length-grouping sampler passed to a DataLoader (``batch_sampler=...``, or ``sampler=...`` beside a
    ``batch_size``) by ``batch_size=<its batch size>, shuffle=True``. A sampler groups by length when it is an
    instance of a class of the file whose ``__iter__`` sorts; its batch size is the argument its ``__init__``
    takes as ``batch_size`` (or ``bs``), which must mean the same where the DataLoader is built. Loaders a
    training loop iterates come first; when none is found that way, every such loader is a site, marked as a
    guess."""

    no_site = "no DataLoader draws its batches from a sampler of its own that sorts by length"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for call in ctx.all(cst.Call):
            if ctx.constructed(call) != LOADER:
                continue
            keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
            for kind in ("batch_sampler", "sampler"):
                arg = keywords.get(kind)
                if arg is None or kind == "sampler" and "batch_size" not in keywords:
                    continue
                built = sampler_call(ctx, arg.value)
                cls = groups_by_sorting(ctx, built) if built is not None else None
                if cls is None:
                    continue
                size = batch_size_of(ctx, built, cls) if kind == "batch_sampler" else keywords["batch_size"].value
                if size is not None and portable(ctx, size, call):
                    found.append((call, arg, size))
        loops = training_loops(ctx)
        trained = [f for f in found if iterated_by(ctx, f[0], loops)]
        return [Site(f"no-grouping:{ctx.where(call)}:DataLoader({dataset_of(ctx, call)}, {arg.keyword.value}="
                     f"{ctx.code(arg.value)})", arg, guessed=not trained) for call, arg, _ in trained or found]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        arg = site.node
        call = ctx.parents[arg]
        if arg.keyword.value == "batch_sampler":
            size = ctx.code(batch_size_of(ctx, sampler_call(ctx, arg.value),
                                          groups_by_sorting(ctx, sampler_call(ctx, arg.value))))
            replacement = cst.parse_expression(f"f(batch_size={size}, shuffle=True)").args
        else:
            replacement = cst.parse_expression("f(shuffle=True)").args
        comma = arg.comma

        def edit(node: cst.Call) -> cst.Call:
            args = []
            for original, new in zip(call.args, node.args):
                if original is arg:
                    args += [*replacement[:-1], replacement[-1].with_changes(comma=comma)]
                else:
                    args.append(new)
            return node.with_changes(args=args)

        return rewrite(ctx.module, {call: edit})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
from torch.utils.data import DataLoader

BATCH = 32


class Buckets:
    def __init__(self, lengths, batch_size):
        self.lengths, self.batch_size = lengths, batch_size

    def __iter__(self):
        order = sorted(torch.randperm(len(self.lengths)).tolist(), key=lambda i: self.lengths[i] // 4)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        yield from (batches[j] for j in torch.randperm(len(batches)).tolist())


loader = DataLoader(data, batch_sampler=Buckets(lengths, BATCH), collate_fn=collate)
for tokens, labels in loader:
    loss_fn(model(tokens), labels).backward()
""",
            after="""\
import torch
from torch.utils.data import DataLoader

BATCH = 32


class Buckets:
    def __init__(self, lengths, batch_size):
        self.lengths, self.batch_size = lengths, batch_size

    def __iter__(self):
        order = sorted(torch.randperm(len(self.lengths)).tolist(), key=lambda i: self.lengths[i] // 4)
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        yield from (batches[j] for j in torch.randperm(len(batches)).tolist())


loader = DataLoader(data, batch_size=BATCH, shuffle=True, collate_fn=collate)
for tokens, labels in loader:
    loss_fn(model(tokens), labels).backward()
""")]


BUG = Bug(
    id="no-grouping",
    title="Batches mix short and long sequences at random",
    difficulty="hard",
    observe=("Training runs, the loss falls and the accuracy is fine. An epoch takes noticeably longer than the "
             "number of tokens in the data would suggest, and the batches' shapes are almost always the longest "
             "possible."),
    hints=(
        "Print, for a few training batches, the width of the token tensor and the lengths of the sequences in it. "
        "How much of each batch is padding?",
        "Which sequence decides the width of a batch? Compare each batch's width with the longest sequence in the "
        "whole dataset: how often are they close?",
        "Look at how the training DataLoader forms its batches: does anything keep sequences of similar length "
        "together?",
    ),
    why=("A batch is padded to its longest sequence, so its cost is batch size × the longest length. Drawn at "
         "random, almost every batch contains one long sequence, and every short sequence in it is padded up to "
         "that length: with lengths spread from 4 to 24 tokens, about 40 % of all positions are padding. A "
         "length-grouped sampler (shuffle, sort within mega-batches of a few batches, cut, shuffle the batches) "
         "puts similar lengths together and cuts the padding to a few percent while keeping the order random "
         "from epoch to epoch."),
    fix=("Batch sequences of similar length together: a length-grouped or bucketing batch sampler passed as "
         "`batch_sampler=` (reshuffled every epoch with `set_epoch`), or sorting within shuffled mega-batches. "
         "Sorting the whole dataset once and never shuffling again removes the padding but replays one fixed "
         "order every epoch: that is another bug."),
    probes=("padding-waste",),
    follow_up=(
        "Why sort only within mega-batches instead of the whole dataset?",
        "How does length grouping interact with a per-token loss averaged per batch (short batches weigh as much "
        "as long ones)?",
        "What does Hugging Face's group_by_length do, and when would you not use it?",
        "How would you pick the mega-batch size?",
    ),
    operator=ShuffleInsteadOfGrouping(),
)
