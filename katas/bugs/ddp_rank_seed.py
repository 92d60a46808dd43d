"""ddp-rank-seed: a random stream meant to differ between ranks is seeded alike on every rank."""
from __future__ import annotations

import libcst as cst

from katas.bugs.ddp_save import Holders, rank_of, ranks
from katas.catalogue import Bug
from katas.engine.context import Context, Role
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import method

MANUAL_SEED = ("torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all")


def seed_argument(call: cst.Call) -> cst.BaseExpression | None:
    arg = next((a for a in call.args if a.keyword is None and not a.star), None) \
        or next((a for a in call.args if a.keyword is not None and a.keyword.value == "seed"), None)
    return arg.value if arg is not None else None


def rank_term(ctx: Context, term: cst.BaseExpression, rank: Holders) -> Role:
    """The rank (``rank``, ``dist.get_rank()``, ``self.rank`` ...), or a multiple of it (``1000 * rank``)."""
    if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Multiply):
        left = rank_term(ctx, term.left, rank)
        return left if left.kind else rank_term(ctx, term.right, rank)
    return rank_of(ctx, term, rank)


def without_rank(ctx: Context, expr: cst.BaseExpression, rank: Holders) -> tuple[cst.BaseExpression | None, list[Role]]:
    """``expr`` less the rank terms of its sum (None when nothing is left), and the roles of the terms dropped."""
    role = rank_term(ctx, expr, rank)
    if role.kind:
        return None, [role]
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add)):
        return expr, []
    left, dropped = without_rank(ctx, expr.left, rank)
    right, more = without_rank(ctx, expr.right, rank)
    if left is None or right is None:
        return (right if left is None else left), dropped + more
    return expr.with_changes(left=left, right=right), dropped + more


class SameSeedEverywhere(Operator):
    """Drop the rank from a seed: in ``manual_seed(seed + rank)`` (a ``torch.Generator``'s, or
    ``torch.manual_seed``), the terms of the sum that are the rank (``rank``, ``dist.get_rank()``, ``self.rank``, a
    name assigned one, such as nanoGPT's ``seed_offset``), or a multiple of it, go; the rest stays. A rank known
    only by its name is a guess."""

    no_site = "it never adds the rank to a seed given to manual_seed()"

    def seeds(self, ctx: Context):
        rank = ranks(ctx)
        for call in ctx.all(cst.Call):
            if method(call) != "manual_seed" and not ctx.is_call_to(call, *MANUAL_SEED):
                continue
            seed = seed_argument(call)
            rest, dropped = without_rank(ctx, seed, rank) if seed is not None else (None, [])
            if rest is not None and dropped:
                yield call, seed, rest, all(r.guessed for r in dropped)

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"ddp-rank-seed:{ctx.where(call)}:{ctx.code(call)}", seed, guessed)
                for call, seed, _, guessed in self.seeds(ctx)]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        rest = next(rest for _, seed, rest, _ in self.seeds(ctx) if seed is site.node)
        return rewrite(ctx.module, {site.node: lambda _: rest})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
import torch.distributed as dist

noise = torch.Generator().manual_seed(args.seed + dist.get_rank())
""",
            after="""\
import torch
import torch.distributed as dist

noise = torch.Generator().manual_seed(args.seed)
"""), Example(
            before="""\
import os
import torch

ddp_rank = int(os.environ["RANK"])
seed_offset = ddp_rank
torch.manual_seed(1337 + seed_offset)
""",
            after="""\
import os
import torch

ddp_rank = int(os.environ["RANK"])
seed_offset = ddp_rank
torch.manual_seed(1337)
""")]


BUG = Bug(
    id="ddp-rank-seed",
    title="Every rank draws the same random numbers",
    difficulty="hard",
    observe=("Under `torchrun --nproc-per-node 2` everything looks normal: the loss falls and the printed "
             "accuracies are close to a correct run's."),
    hints=(
        "On every rank, print the first few numbers the augmentation draws. Should the ranks agree?",
        "Every rank runs the same code from the same starting point. What makes their random choices differ?",
        "Look at how the generator that jitters the inputs is seeded on each rank.",
    ),
    why=("Each rank is a copy of the same program. A generator seeded with the same number on every rank gives "
         "every rank the same stream: the ranks draw identical noise (identical dropout masks, crops, or "
         "batches, if that stream samples data), so the data they average over are less diverse than the world "
         "size suggests, and with a sampled batch the ranks even compute the same gradients."),
    fix=("Seed the per-rank stream with something that differs by rank, `manual_seed(seed + rank)`, while "
         "whatever must agree across ranks (initial weights, the sampler's shuffle) keeps a common seed."),
    probes=("rank-streams",),
    follow_up=(
        "Which random streams must agree across ranks, and which must differ?",
        "DDP broadcasts rank 0's weights at construction: what would go wrong without that if each rank seeded "
        "torch with `seed + rank`?",
        "How would you make such a run reproducible when the world size changes?",
    ),
    operator=SameSeedEverywhere(),
)
