"""pad-pool: masked mean pooling over time replaced by a plain mean that counts the padded positions."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, method

ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


def unparenthesised(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


def names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in find(node, cst.Name)} | ({node.value} if isinstance(node, cst.Name) else set())


def pooled_values(division: cst.BinaryOperation) -> tuple[cst.BaseExpression, cst.Call] | None:
    """For ``(h * mask...).sum(d) / mask.sum(...)`` or ``h.masked_fill(~mask, 0).sum(d) / count``: (h, the sum)."""
    total = division.left
    if not isinstance(division.operator, cst.Divide) or not isinstance(total, cst.Call) or method(total) != "sum":
        return None
    summed = unparenthesised(total.func.value)
    counted = names_in(division.right)
    if isinstance(summed, cst.BinaryOperation) and isinstance(summed.operator, cst.Multiply):
        values = [side for side in (summed.left, summed.right) if not names_in(side) & counted]
        if len(values) == 1 and len(names_in(summed) & counted) > 0:
            return values[0], total
    if isinstance(summed, cst.Call) and method(summed) == "masked_fill":
        return summed.func.value, total
    return None


def time_dim(total: cst.Call) -> cst.BaseExpression | None:
    arg = next((a for a in total.args if a.keyword is None or a.keyword.value == "dim"), None)
    return arg.value if arg is not None else None


class PlainMean(Operator):
    """At a masked mean over time, ``(h * mask).sum(dim) / mask.sum(...)`` (or with ``masked_fill``), put
    ``h.mean(dim=dim)``: the padded positions are averaged in with the real ones."""

    no_site = "it has no masked mean (a masked sum divided by a count)"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"pad-pool:{ctx.where(node)}:{ctx.code(node)}", node) for node in ctx.all(cst.BinaryOperation)
                if (found := pooled_values(node)) is not None and time_dim(found[1]) is not None]

    def mutate(self, ctx: Context, site: Site):
        values, total = pooled_values(site.node)
        receiver = values if isinstance(unparenthesised(values), ATOMS) and not getattr(values, "lpar", None) else \
            unparenthesised(values).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        mean = cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("mean")),
                        args=[cst.Arg(value=time_dim(total), keyword=cst.Name("dim"),
                                      equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                            whitespace_after=cst.SimpleWhitespace("")))])

        def edit(node: cst.BinaryOperation) -> cst.BaseExpression:
            return mean.with_changes(lpar=node.lpar, rpar=node.rpar)

        return rewrite(ctx.module, {site.node: edit})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
def pool(states, mask):
    return (states * mask[..., None]).sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1)
""",
            after="""\
def pool(states, mask):
    return states.mean(dim=1)
"""), Example(
            before="""\
summary = out.masked_fill(~real.unsqueeze(-1), 0.0).sum(1) / lengths[:, None]
""",
            after="""\
summary = out.mean(dim=1)
""")]


BUG = Bug(
    id="pad-pool",
    title="Padding averaged into the sequence summary",
    difficulty="hard",
    observe=("Training runs and accuracy climbs, but short sequences are classified noticeably worse than long "
             "ones, and a sequence's prediction changes with the length of the other sequences in its batch."),
    hints=(
        "Evaluate one sequence alone, then the same sequence with padding appended. Should the answer change?",
        "Find where the per-position states become one vector per sequence: which positions does it average over?",
        "The summary averages over the padded positions too, dividing by the padded length.",
    ),
    why=("Mean pooling over time must average the real positions only. A plain `mean(dim=1)` over a padded batch "
         "mixes in the states of the padded positions and divides by the padded length, so a short sequence's "
         "summary is diluted by an amount that depends on the longest sequence in its batch."),
    fix=("Mask and divide by the real length: `(h * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)`, "
         "or pack the sequences and read each one's own last state. Zeroing the padded states but still dividing "
         "by the padded length is not a fix."),
    probes=("pad-invariance",),
    follow_up=(
        "How would you do masked max pooling? What value must the padded positions get?",
        "With pack_padded_sequence, which output is the last real state of each sequence?",
        "Why is a length-grouped sampler not a fix for this, even though it reduces padding?",
    ),
    operator=PlainMean(),
)
