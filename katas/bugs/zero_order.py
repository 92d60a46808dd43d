"""zero-order: the gradients are reset between ``backward()`` and the optimizer step.

Sites: a ``zero_grad()`` of an optimizer or model that comes before a ``backward()`` in the same block, which an
optimizer step (``optimizer.step()``, ``scaler.step(optimizer)``) follows in that block, with no other reset
between. The edit moves the reset to just before the step: every step finds the gradients gone.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import MODEL, OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import call_statement
from katas.engine.tree import find, method


def resets(ctx: Context, statement: cst.CSTNode) -> bool:
    call = call_statement(statement)
    return call is not None and method(call) == "zero_grad" and ctx.role(call.func.value).kind in (OPTIMIZER, MODEL)


def backpropagates(statement: cst.CSTNode) -> bool:
    return any(method(c) == "backward" for c in find(statement, cst.Call))


def steps(ctx: Context, statement: cst.CSTNode) -> bool:
    """``optimizer.step()`` (an optimizer's step), or ``scaler.step(optimizer)``."""
    call = call_statement(statement)
    if call is None or method(call) != "step":
        return False
    return ctx.role(call.func.value).kind == OPTIMIZER or any(ctx.role(a.value).kind == OPTIMIZER for a in call.args)


def site_in(ctx: Context, block: cst.IndentedBlock | cst.Module) -> tuple[int, int] | None:
    """(index of the reset, index of the step it moves before) in ``block``, else None."""
    body = list(block.body)
    for i, statement in enumerate(body):
        if not resets(ctx, statement):
            continue
        backward = next((j for j in range(i + 1, len(body)) if backpropagates(body[j])), None)
        if backward is None:
            return None
        step = next((k for k in range(backward + 1, len(body)) if steps(ctx, body[k])), None)
        if step is not None and not any(resets(ctx, s) for s in body[i + 1:step]):
            return i, step
        return None
    return None


class ResetBetweenBackwardAndStep(Operator):
    """Move the ``zero_grad()`` that precedes a backward pass to just before the optimizer step that follows it."""

    no_site = "no zero_grad() precedes a backward() that an optimizer step follows in the same block"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for block in [ctx.module, *ctx.all(cst.IndentedBlock)]:
            where = site_in(ctx, block)
            if where is not None:
                call = call_statement(block.body[where[0]])
                found.append(Site(f"zero-order:{ctx.where(block.body[where[0]])}:{ctx.code(call)}", block))
        return found

    def mutate(self, ctx: Context, site: Site):
        reset, step = site_in(ctx, site.node)

        def edit(block):
            body = list(block.body)
            moved = body[reset]
            after = body[reset + 1].with_changes(leading_lines=[*moved.leading_lines, *body[reset + 1].leading_lines])
            body[reset + 1] = after
            moved = moved.with_changes(leading_lines=[])
            body.insert(step, moved)
            del body[reset]
            return block.with_changes(body=body)

        return rewrite(ctx.module, {site.node: edit})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
""",
            after="""\
import torch

opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.zero_grad()
    opt.step()
""")]


BUG = Bug(
    id="zero-order",
    title="Gradients reset between backward and step",
    difficulty="easy",
    observe=("The script runs to the end without an error, but nothing is learned: the training loss stays where "
             "it started, epoch after epoch, and the weights are the same after every optimizer step as before it."),
    hints=(
        "Print one weight just before and just after `optimizer.step()`. Does the step change it?",
        "What does `optimizer.step()` read to compute its update, and what does that hold at the moment it runs?",
        "`zero_grad()` runs between `backward()` and `step()`: the step finds the gradients already reset and "
        "applies nothing.",
    ),
    why=("`backward()` accumulates into each parameter's `.grad`; `step()` reads `.grad` to update the weights; "
         "`zero_grad()` resets `.grad` (to None with `set_to_none=True`, the default). Reset between the two, every "
         "step finds no gradient: optimizers skip parameters whose `.grad` is None, and with zeros an SGD or Adam "
         "step moves nothing (only weight decay or momentum left from earlier steps would). The order matters: "
         "reset, forward, backward, step."),
    fix=("Reset before the forward pass (or right after `step()`, so the next backward starts clean): "
         "`optimizer.zero_grad(set_to_none=True)` first, then forward, loss, `backward()`, clipping, `step()`."),
    probes=("weights-update",),
    follow_up=(
        "Where can `zero_grad()` go in the loop, and where can it not? What changes with gradient accumulation?",
        "With `zero_grad(set_to_none=False)` and AdamW, would the weights still move? Why?",
        "Why does `set_to_none=True` make an optimizer skip a parameter, and when is that different from zeros?",
    ),
    operator=ResetBetweenBackwardAndStep(),
)
