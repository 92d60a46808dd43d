"""clip-order: gradient clipping runs after ``optimizer.step()`` instead of before it."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, move_statement_after
from katas.engine.patterns import call_statement

CLIP = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_")


class ClipAfterStep(Operator):
    """Move a ``clip_grad_norm_`` line to just after the optimizer step that follows it."""

    no_site = "it does not clip gradients before an optimizer step"

    def pairs(self, ctx: Context):
        for statement, call in [(ctx.statement(c), c) for c in ctx.calls(ctx.module) if ctx.is_call_to(c, *CLIP)]:
            if call_statement(statement) is not call or not isinstance(ctx.parents[statement], (cst.IndentedBlock, cst.Module)):
                continue
            block = ctx.parents[statement].body
            for later in block[block.index(statement) + 1:]:
                step = call_statement(later)
                if step is not None and isinstance(step.func, cst.Attribute) and step.func.attr.value == "step" \
                        and ctx.role(step.func.value).kind == OPTIMIZER:
                    yield statement, later, ctx.role(step.func.value)
                    break

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"clip-order:{ctx.where(clip)}:{ctx.code(clip)}", clip, role.guessed)
                for clip, _, role in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        step = next(step for clip, step, _ in self.pairs(ctx) if clip is site.node)
        return move_statement_after(ctx, site.node, step)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
optimizer.step()
""",
            after="""\
import torch

loss.backward()
optimizer.step()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""")]


BUG = Bug(
    id="clip-order",
    title="Gradients clipped after the optimizer step",
    difficulty="easy",
    observe=("Gradient clipping is configured, yet the updates are as spiky as without it: logged update "
             "sizes jump far above what the clip value should allow."),
    hints=(
        "Print the gradient norm at the moment the optimizer applies it.",
        "Clipping changes `.grad`. When does the optimizer read `.grad`?",
        "The clip happens, just too late to matter.",
    ),
    why=("`optimizer.step()` applies whatever is in `.grad` at that moment. Clipping afterwards rescales "
         "gradients that have already been used (and are about to be reset), so it has no effect."),
    fix="Clip after `loss.backward()` and before `optimizer.step()` (after `scaler.unscale_()` with AMP).",
    probes=("clip-order",),
    follow_up=(
        "Why must you unscale before clipping when using a GradScaler?",
        "What does the value returned by clip_grad_norm_ tell you?",
        "Clip by norm or by value: when would you choose each?",
    ),
    operator=ClipAfterStep(),
)
