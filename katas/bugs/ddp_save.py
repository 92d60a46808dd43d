"""ddp-save: the checkpoint is written by every rank, not only by rank 0."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from katas.bugs.ddp_set_epoch import held
from katas.bugs.val_grad import body_in_place
from katas.catalogue import Bug
from katas.engine.context import Context, Role
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, method

RANK, MAIN = "rank", "main"
RANK_NAME = re.compile(r"(^|_)rank$")
MAIN_NAME = re.compile(r"^(is_)?(main|master)(_process|_rank)?$|^is_rank_?zero$")
GET_RANK = ("torch.distributed.get_rank", "torch.distributed.distributed_c10d.get_rank")
RANK_VARIABLES = {"RANK", "LOCAL_RANK"}
SAVE = ("torch.save",)


@dataclass(frozen=True)
class Holders:
    """Binding keys of the names and ``self`` attributes that hold a kind of value: found by structure alone, or
    also through conventional names (a guess)."""

    known: set
    guessed: set

    def role(self, ctx: Context, expr: cst.BaseExpression, kind: str) -> Role:
        key = ctx.binding(expr)
        return Role(kind) if key in self.known else Role(kind, guessed=True) if key in self.guessed else Role(None)


def holders(ctx: Context, structural: Callable, conventional: Callable) -> Holders:
    return Holders(held(ctx, structural), held(ctx, lambda value: structural(value) or conventional(value)))


def own_name(expr: cst.BaseExpression) -> str:
    return expr.value if isinstance(expr, cst.Name) else expr.attr.value if isinstance(expr, cst.Attribute) else ""


def environment_rank(ctx: Context, expr: cst.BaseExpression) -> bool:
    """``os.environ["RANK"]``, ``os.environ.get("LOCAL_RANK", 0)``, ``os.getenv("RANK")``."""
    if isinstance(expr, cst.Subscript) and "os.environ" in ctx.qualified_names(expr.value) and len(expr.slice) == 1:
        key = expr.slice[0].slice
        key = key.value if isinstance(key, cst.Index) else None
    elif isinstance(expr, cst.Call) and expr.args and (
            ctx.is_call_to(expr, "os.getenv") or method(expr) == "get"
            and "os.environ" in ctx.qualified_names(expr.func.value)):
        key = expr.args[0].value
    else:
        return False
    return isinstance(key, cst.SimpleString) and key.evaluated_value in RANK_VARIABLES


def is_rank(ctx: Context, expr: cst.BaseExpression) -> bool:
    """``dist.get_rank()``, ``int(os.environ["RANK"])`` ...: this process's rank, read where it is known."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "int" and expr.args:
        expr = expr.args[0].value
    return isinstance(expr, cst.Call) and ctx.is_call_to(expr, *GET_RANK) or environment_rank(ctx, expr)


def ranks(ctx: Context) -> Holders:
    """What holds the rank; a name ending in ``rank`` (``local_rank``, ``args.rank``) is a guess."""
    return holders(ctx, lambda value: is_rank(ctx, value), lambda value: bool(RANK_NAME.search(own_name(value))))


def rank_of(ctx: Context, expr: cst.BaseExpression, rank: Holders) -> Role:
    """Whether ``expr`` is this process's rank: read where it is known, or a name or ``self`` attribute holding it
    (``rank``); a name ending in ``rank`` is a guess."""
    if is_rank(ctx, expr):
        return Role(RANK)
    role = rank.role(ctx, expr, RANK)
    return role if role.kind or not RANK_NAME.search(own_name(expr)) else Role(RANK, guessed=True)


def is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.evaluated_value == 0


def main_test(ctx: Context, test: cst.BaseExpression, rank: Holders, flags: Holders | None = None,
              follow: bool = True) -> Role:
    """Whether ``test`` holds on rank 0 only: ``rank == 0``, ``not rank``, ``rank in (-1, 0)``, ``not ddp or
    rank == 0``, ``rank == 0 and epoch % every == 0``, a name or ``self`` attribute holding such a test (``flags``),
    a function of the file returning one (``follow``); as a guess, a name like ``is_main`` or ``master_process``
    (also called: ``is_main_process()``)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        other = test.comparisons[0]
        if isinstance(other.operator, cst.Equal) and (is_zero(other.comparator) or is_zero(test.left)):
            return rank_of(ctx, test.left if is_zero(other.comparator) else other.comparator, rank)
        if isinstance(other.operator, cst.In) and isinstance(other.comparator, (cst.Tuple, cst.List, cst.Set)) \
                and any(is_zero(e.value) for e in other.comparator.elements):
            return rank_of(ctx, test.left, rank)
        return Role(None)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return rank_of(ctx, test.expression, rank)
    if isinstance(test, cst.BooleanOperation):  # ``not ddp or rank == 0``; ``rank == 0 and step % every == 0``
        left = main_test(ctx, test.left, rank, flags, follow)
        return left if left.kind else main_test(ctx, test.right, rank, flags, follow)
    if isinstance(test, cst.Call) and not test.args:
        function = ctx.functions.get(own_name(test.func)) if follow else None
        for returned in find(function, cst.Return) if function is not None else []:
            if returned.value is not None and (role := main_test(ctx, returned.value, rank, flags, False)).kind:
                return role
        test = test.func
    role = flags.role(ctx, test, MAIN) if flags is not None else Role(None)
    return role if role.kind or not MAIN_NAME.search(own_name(test)) else Role(MAIN, guessed=True)


def main_flags(ctx: Context, rank: Holders) -> Holders:
    """What holds a test for rank 0 (``master_process = rank == 0``)."""
    def test(value: cst.BaseExpression) -> Role:
        return main_test(ctx, value, rank) if isinstance(value, (cst.Comparison, cst.UnaryOperation,
                                                                 cst.BooleanOperation, cst.Call)) else Role(None)

    return holders(ctx, lambda value: test(value).kind is not None and not test(value).guessed,
                   lambda value: test(value).kind is not None)


class SaveOnEveryRank(Operator):
    """Remove the rank-0 guard (``if rank == 0:``, ``if dist.get_rank() == 0:``, ``if self.is_main:`` ...) around
    a block that calls ``torch.save``, there or in a function or method of the file it calls: its body takes its
    place, dedented; from a guard that also tests something else (``if rank == 0 and epoch % every == 0:``), only
    the test for rank 0 goes. Not a guard with an ``else``, nor an ``elif``. A guard known only by its names
    (``rank``, ``is_main``) is a guess."""

    no_site = "it never guards a torch.save() with a test for rank 0"

    def sites(self, ctx: Context) -> list[Site]:
        if not any(ctx.is_call_to(c, *SAVE) for c in ctx.all(cst.Call)):
            return []
        rank = ranks(ctx)
        flags = main_flags(ctx, rank)
        found = []
        for node in ctx.all(cst.If):
            if node.orelse is not None or isinstance(ctx.parents.get(node), cst.If) \
                    or not any(ctx.is_call_to(c, *SAVE) for c in ctx.runs(node.body)):
                continue
            role = main_test(ctx, node.test, rank, flags)
            if role.kind:
                found.append(Site(f"ddp-save:{ctx.where(node)}:if {ctx.code(node.test)}", node, role.guessed))
        return found

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        test = site.node.test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            rank = ranks(ctx)
            kept = test.right if main_test(ctx, test.left, rank, main_flags(ctx, rank)).kind else test.left
            return rewrite(ctx.module, {site.node: lambda node: node.with_changes(test=kept)})
        return body_in_place(ctx, site.node)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
import torch.distributed as dist

for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), f"epoch{epoch}.pt")
""",
            after="""\
import torch
import torch.distributed as dist

for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer)
    torch.save(model.module.state_dict(), f"epoch{epoch}.pt")
"""), Example(
            before="""\
import os
import torch

master_process = int(os.environ["RANK"]) == 0
if master_process:
    print(f"saving checkpoint to {out_dir}")
    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
""",
            after="""\
import os
import torch

master_process = int(os.environ["RANK"]) == 0
print(f"saving checkpoint to {out_dir}")
torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
""")]


BUG = Bug(
    id="ddp-save",
    title="Every rank writes the checkpoint",
    difficulty="medium",
    observe=("Under `torchrun --nproc-per-node 2` the run prints the usual accuracies and leaves a checkpoint that "
             "loads; nothing in the output looks wrong. With many processes on a shared filesystem, the end of "
             "the run slows down and the checkpoint is now and then found truncated."),
    hints=(
        "Log the rank of the process each time the checkpoint file is written. How many lines do you get?",
        "Every rank runs every line of the script unless something stops it. What stops a rank here?",
        "Look at what decides which processes reach `torch.save`.",
    ),
    why=("Under torchrun every rank runs the whole script. Without a rank-0 guard every rank writes the same "
         "file at the same time: N times the I/O, and concurrent writers that can interleave or truncate each "
         "other's bytes, leaving a corrupt checkpoint (and on some filesystems, errors). The replicas are equal, "
         "so one writer is enough."),
    fix=("Write only on rank 0: `if dist.get_rank() == 0: torch.save(...)`, then `dist.barrier()` so no rank "
         "reads or exits before the file is complete."),
    probes=("rank-writes",),
    follow_up=(
        "Why is a barrier after the save useful, and where can a barrier deadlock?",
        "When must every rank take part in saving (think of sharded optimizer state)?",
        "How do you load a checkpoint saved from `model.module` into a model that is not wrapped, and vice versa?",
    ),
    operator=SaveOnEveryRank(),
)
