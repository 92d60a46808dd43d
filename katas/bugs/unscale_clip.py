"""unscale-clip: gradients clipped while still multiplied by the GradScaler's scale."""
from __future__ import annotations

from katas.bugs.clip_order import CLIP
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, remove_statements
from katas.engine.patterns import call_statement, runs_after


class ClipScaled(Operator):
    """Remove ``scaler.unscale_(optimizer)`` where a ``clip_grad_norm_`` follows it."""

    no_site = "it does not unscale a GradScaler's gradients before clipping them"

    def unscales(self, ctx: Context):
        for call in ctx.calls(ctx.module, "unscale_"):
            statement = ctx.statement(call)
            if call_statement(statement) is not call:
                continue
            if any(ctx.is_call_to(c, *CLIP) for later in runs_after(ctx, statement) for c in ctx.calls(later)):
                yield statement

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"unscale-clip:{ctx.where(s)}:{ctx.code(s)}", s) for s in self.unscales(ctx)]

    def mutate(self, ctx: Context, site: Site):
        return remove_statements(ctx, [site.node])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
""",
            after="""\
import torch

scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
""")]


BUG = Bug(
    id="unscale-clip",
    title="Gradients clipped before unscaling",
    difficulty="hard",
    observe=("With mixed precision on, training barely moves: the loss falls far more slowly than in the same "
             "run in full precision, although nothing is NaN and the clip value looks sensible."),
    hints=(
        "Print the norm `clip_grad_norm_` returns, then the gradient norm the optimizer actually applies.",
        "Under a GradScaler, what units are `.grad` in right after `backward()`?",
        "The clip measures the gradients before they are brought back to their true size.",
    ),
    why=("`scaler.scale(loss).backward()` leaves `.grad` multiplied by the scale (65536 at first). Clipping "
         "those measures a norm thousands of times too large and shrinks the gradients to `max_norm`; "
         "`scaler.step` then divides by the scale, so the update applies `max_norm / scale`: almost nothing."),
    fix="Call `scaler.unscale_(optimizer)` after the backward passes and before `clip_grad_norm_`, then `scaler.step`.",
    probes=("clip-units",),
    follow_up=(
        "Why does `scaler.step` not unscale a second time after `unscale_`?",
        "What happens if `unscale_` is called twice before one step?",
        "Does bfloat16 autocast need a GradScaler at all?",
    ),
    operator=ClipScaled(),
)
