"""clip-order: gradient clipping runs after ``optimizer.step()`` instead of before it."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context, Role
from katas.engine.operator import Example, Operator, Site, move_statement_after
from katas.engine.patterns import call_statement, later_siblings
from katas.engine.tree import method

CLIP = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_")


def optimizer_step(ctx: Context, statement: cst.CSTNode) -> Role | None:
    """The optimizer's role when ``statement`` is ``optimizer.step()`` or ``scaler.step(optimizer)``."""
    call = call_statement(statement)
    if method(call) != "step":
        return None
    for owner in [call.func.value, *(a.value for a in call.args[:1] if a.keyword is None)]:
        role = ctx.role(owner)
        if role.kind == OPTIMIZER:
            return role
    return None


class ClipAfterStep(Operator):
    """Move a ``clip_grad_norm_`` line to just after the optimizer step that follows it.

    A clip under ``if grad_clip:`` with the step after that ``if`` moves on its own, under the same test, so
    that ``scaler.unscale_()`` stays before the step.
    """

    no_site = "it does not clip gradients before an optimizer step"

    def pairs(self, ctx: Context):
        """(clip line, the step after it, the optimizer's role, the ``if`` around the clip or None)."""
        for statement, call in [(ctx.statement(c), c) for c in ctx.calls(ctx.module) if ctx.is_call_to(c, *CLIP)]:
            if call_statement(statement) is not call:
                continue
            block = ctx.parents[statement]
            levels = [(statement, None)]  # where to look for the step after the clip, and the test to keep
            if isinstance(ctx.parents.get(block), cst.If) and ctx.parents[block].body is block:
                levels.append((ctx.parents[block], ctx.parents[block]))
            step = next(((later, role, guard) for level, guard in levels for later in later_siblings(ctx, level)
                         if (role := optimizer_step(ctx, later))), None)
            if step is not None:
                yield statement, *step

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"clip-order:{ctx.where(clip)}:{ctx.code(clip)}", clip, role.guessed)
                for clip, _, role, _ in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        step, guard = next((step, guard) for clip, step, _, guard in self.pairs(ctx) if clip is site.node)
        if guard is None:
            return move_statement_after(ctx, site.node, step)
        if len(guard.body.body) == 1 and guard.orelse is None:
            return move_statement_after(ctx, guard, step)
        return move_statement_after(ctx, site.node, step, guard.test)

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
    difficulty="medium",
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
