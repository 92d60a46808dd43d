"""ddp-metric: the validation accuracy is computed from one rank's shard, its counts never summed over the ranks."""
from __future__ import annotations

import libcst as cst

from katas.bugs.metric_count import compares, evaluation_loops, in_scope
from katas.bugs.no_shuffle import reads, targets, training_loops
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, removal_edits, rewrite
from katas.engine.patterns import call_statement
from katas.engine.tree import find

ALL_REDUCE = ("torch.distributed.all_reduce", "torch.distributed.distributed_c10d.all_reduce")


def reduced(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor an all-reduce sums in place: its first positional argument, or ``tensor=``."""
    arg = next((a for a in call.args if a.keyword is None and not a.star), None) \
        or next((a for a in call.args if a.keyword is not None and a.keyword.value == "tensor"), None)
    return arg.value if arg is not None else None


def assignments(ctx: Context, scope: cst.CSTNode) -> list[tuple[set, cst.BaseExpression, cst.CSTNode]]:
    """(binding keys written, value, node) of each assignment in ``scope`` itself: ``x = v``, ``x += v``,
    ``x[0] += v``."""
    found = []
    for node in [*find(scope, cst.Assign), *find(scope, cst.AugAssign), *find(scope, cst.AnnAssign)]:
        if node.value is None or not in_scope(ctx, node, scope):
            continue
        keys = set()
        for target in [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]:
            for written in targets(target):
                while isinstance(written, cst.Subscript):
                    written = written.value
                if (key := ctx.binding(written)) is not None:
                    keys.add(key)
        found.append((keys, node.value, node))
    return found


def counts_hits(ctx: Context, tensor: cst.BaseExpression) -> bool:
    """Whether ``tensor`` holds an evaluation's count of correct predictions: it is, or its function computes it
    from, a name to which a loop (or comprehension) over a DataLoader that trains nothing adds a comparison
    (``pred == y``, ``pred.eq(y)``)."""
    scope = ctx.enclosing(tensor, cst.FunctionDef) or ctx.module
    written = assignments(ctx, scope)
    needed = reads(ctx, tensor)
    for _ in range(10):
        before = set(needed)
        needed |= {key for keys, value, _ in written if keys & needed for key in reads(ctx, value)}
        if needed == before:
            break
    training = set(training_loops(ctx))
    evaluations = {loop for loop, _ in evaluation_loops(ctx, scope) if loop not in training}
    return any(keys & needed and compares(value) and evaluations & {*ctx.ancestors(node), *find(value, cst.CompFor)}
               for keys, value, node in written)


class ReportOneShard(Operator):
    """Delete the ``dist.all_reduce(...)`` line (or ``torch.distributed.all_reduce``) that sums an evaluation's
    count of correct predictions over ranks, so that each rank's accuracy is its own shard's."""

    no_site = "it never sums an evaluation's count of correct predictions over ranks with all_reduce()"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for call in ctx.all(cst.Call):
            statement = ctx.statement(call) if ctx.is_call_to(call, *ALL_REDUCE) else None
            tensor = reduced(call) if statement is not None and call_statement(statement) is call else None
            if tensor is not None and counts_hits(ctx, tensor):
                found.append(Site(f"ddp-metric:{ctx.where(statement)}:{ctx.code(statement)}", statement))
        return found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        return rewrite(ctx.module, removal_edits(ctx, [site.node], end_comments=True))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
import torch.distributed as dist


@torch.no_grad()
def validate(net, loader):
    net.eval()
    correct = torch.zeros(2)
    for x, y in loader:
        correct += torch.tensor([(net(x).argmax(1) == y).sum(), len(y)])
    dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    return (correct[0] / correct[1]).item()
""",
            after="""\
import torch
import torch.distributed as dist


@torch.no_grad()
def validate(net, loader):
    net.eval()
    correct = torch.zeros(2)
    for x, y in loader:
        correct += torch.tensor([(net(x).argmax(1) == y).sum(), len(y)])
    return (correct[0] / correct[1]).item()
"""), Example(
            before="""\
import torch

for epoch in range(epochs):
    train_one_epoch(model, train_loader, opt)
    hits = torch.tensor(0)
    for x, y in val_loader:
        hits += (model(x).argmax(-1) == y).sum()
    torch.distributed.all_reduce(hits)
    print(f"epoch {epoch}: accuracy {hits.item() / len(val_loader.dataset):.3f}")
""",
            after="""\
import torch

for epoch in range(epochs):
    train_one_epoch(model, train_loader, opt)
    hits = torch.tensor(0)
    for x, y in val_loader:
        hits += (model(x).argmax(-1) == y).sum()
    print(f"epoch {epoch}: accuracy {hits.item() / len(val_loader.dataset):.3f}")
""")]


BUG = Bug(
    id="ddp-metric",
    title="The validation accuracy comes from one rank's shard",
    difficulty="medium",
    observe=("Under `torchrun --nproc-per-node 2` training looks healthy and the printed validation accuracy "
             "rises, but it moves with the number of processes launched, and it does not match the accuracy of the "
             "saved checkpoint scored on the whole validation set in one process."),
    hints=(
        "How many validation samples does the printed accuracy count? Print the denominator on each rank.",
        "Each rank scores only its shard of the validation set. Where do the shards' counts meet?",
        "The counts are computed on every rank, but only rank 0 prints them. What should happen to them first?",
    ),
    why=("A DistributedSampler deals each rank a disjoint shard of the validation set, so each rank's counts "
         "cover only 1/N of it. Without an all-reduce that sums the counts over ranks, rank 0 prints the accuracy "
         "of its own shard: a noisier estimate on fewer samples, which changes with the world size and is not "
         "the model's validation accuracy."),
    fix=("Sum the numerator and the denominator over ranks before dividing: `dist.all_reduce(counts, "
         "op=dist.ReduceOp.SUM)` on a tensor holding (correct, seen), or gather the predictions with "
         "`dist.all_gather`. Averaging per-rank accuracies is only right when every shard has the same size."),
    probes=("reported-metric",),
    follow_up=(
        "Why is the mean of the ranks' accuracies not always the accuracy over the whole set?",
        "A DistributedSampler pads the last shard with repeated samples. What does that do to a validation "
        "metric, and how do you avoid it?",
        "Why must every rank reach the all-reduce, even those that print nothing?",
    ),
    operator=ReportOneShard(),
)
