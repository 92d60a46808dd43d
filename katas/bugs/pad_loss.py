"""pad-loss: the per-token loss no longer leaves padded positions out (``ignore_index`` dropped)."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite

LOSSES = {"torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss", "torch.nn.NLLLoss",
          "torch.nn.modules.loss.NLLLoss", "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"}


def ignore_argument(call: cst.Call) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == "ignore_index"), None)


def without_argument(call: cst.Call, doomed: cst.Arg) -> cst.Call:
    """``call`` less the argument ``doomed`` (matched by position), the last comma left as it was."""
    index = list(call.args).index(doomed)
    args = [a for i, a in enumerate(call.args) if i != index]
    if args and index == len(args):  # the last argument went: the new last one takes its comma
        args[-1] = args[-1].with_changes(comma=call.args[index].comma)
    return call.with_changes(args=args)


def negative(ctx: Context, value: cst.BaseExpression) -> bool:
    """``-100``, or a name the module binds to a negative integer (``IGNORE = -100``)."""
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) \
            and isinstance(value.expression, cst.Integer):
        return True
    if not isinstance(value, cst.Name):
        return False
    for statement in ctx.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for assign in statement.body:
            if isinstance(assign, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == value.value
                                                      for t in assign.targets):
                return negative(ctx, assign.value)
    return False


class DropIgnoreIndex(Operator):
    """At a cross-entropy or NLL loss (``nn.CrossEntropyLoss``, ``F.cross_entropy``, ...) built or called with
    ``ignore_index=...``, remove that argument: padded targets then count as a class like any other. Not where
    the ignored value is negative (``-100``, nanoGPT's ``-1``): no class has that index, so without the argument
    the loss raises on a padded target or, when no target is padded, nothing changes."""

    no_site = "it has no cross-entropy or NLL loss whose `ignore_index` is a class index (a padding token's id)"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"pad-loss:{ctx.where(call)}:{ctx.code(call)}", call)
                for call in ctx.all(cst.Call) if ctx.is_call_to(call, *LOSSES)
                and (arg := ignore_argument(call)) is not None and not negative(ctx, arg.value)]

    def mutate(self, ctx: Context, site: Site):
        index = list(site.node.args).index(ignore_argument(site.node))
        return rewrite(ctx.module, {site.node: lambda call: without_argument(call, call.args[index])})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch.nn.functional as F

loss = F.cross_entropy(logits.transpose(1, 2), tags, ignore_index=PAD_TAG)
""",
            after="""\
import torch.nn.functional as F

loss = F.cross_entropy(logits.transpose(1, 2), tags)
"""), Example(
            before="""\
from torch import nn

token_loss = nn.CrossEntropyLoss(ignore_index=pad_id, label_smoothing=0.1)
""",
            after="""\
from torch import nn

token_loss = nn.CrossEntropyLoss(label_smoothing=0.1)
""")]


BUG = Bug(
    id="pad-loss",
    title="Padding counted in the per-token loss",
    difficulty="medium",
    observe=("Training runs and the per-token loss falls quickly, faster on batches of short sequences, but the "
             "per-token predictions on real tokens improve far less than that loss suggests, and the loss of the "
             "same data changes with the batch's longest sequence."),
    hints=(
        "Which positions of the per-token loss does a batch of short sequences mostly consist of?",
        "Look at the gradient the per-token loss sends to each position: is any position of a padded batch "
        "receiving a gradient it should not?",
        "The padded positions have a target too, and the loss treats it like a real class.",
    ),
    why=("A padded batch holds padding positions whose target is the padding id. Unless the loss leaves them out "
         "(`ignore_index=PAD`, or a mean over real tokens only), the model is trained to predict padding there: an "
         "easy target that dominates short sequences, dilutes the gradient of the real tokens, and makes the loss "
         "depend on how much padding the batch holds."),
    fix=("Give the loss `ignore_index=` the padding id (`nn.CrossEntropyLoss(ignore_index=PAD)`), or compute it "
         "with `reduction='none'` and average over real tokens only: `(loss * keep).sum() / keep.sum()`. "
         "Multiplying the loss by the fraction of real tokens does not remove padding: it only rescales."),
    probes=("pad-targets",),
    follow_up=(
        "With `ignore_index`, what does the mean reduction divide by? Why does that matter with gradient accumulation?",
        "How would you mask a per-token loss when the padded targets are not a single id?",
        "What else must ignore padding: pooling, attention, metrics?",
    ),
    operator=DropIgnoreIndex(),
)
