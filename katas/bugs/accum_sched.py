"""accum-sched: with gradient accumulation, the scheduler is stepped every micro-batch instead of every update."""
from __future__ import annotations

import libcst as cst

from katas.bugs.clip_order import optimizer_step
from katas.catalogue import Bug
from katas.engine.context import LOOPS, SCHEDULER, Context
from katas.engine.operator import Example, Operator, Site, move_statement_after
from katas.engine.patterns import call_statement
from katas.engine.tree import method


class StepPerMicroBatch(Operator):
    """Move ``scheduler.step()`` out of the ``if`` that gates the optimizer step (``if (i + 1) % ACCUM == 0:``),
    to just after that ``if``, inside the micro-batch loop."""

    no_site = "it does not step a scheduler next to an optimizer step gated inside a micro-batch loop"

    def pairs(self, ctx: Context):
        for guard in ctx.all(cst.If):
            if ctx.enclosing(guard, LOOPS) is None or not isinstance(guard.body, cst.IndentedBlock):
                continue
            body = list(guard.body.body)
            if not any(optimizer_step(ctx, s) for s in body):
                continue
            for statement in body:
                call = call_statement(statement)
                if call is not None and method(call) == "step" and ctx.role(call.func.value).kind == SCHEDULER:
                    yield statement, guard, ctx.role(call.func.value)

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"accum-sched:{ctx.where(statement)}:{ctx.code(guard.test)}:{ctx.code(statement)}", statement,
                     role.guessed) for statement, guard, role in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        guard = next(guard for statement, guard, _ in self.pairs(ctx) if statement is site.node)
        return move_statement_after(ctx, site.node, guard)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
""",
            after="""\
for i, (x, y) in enumerate(loader):
    (loss_fn(model(x), y) / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        optimizer.step()
        optimizer.zero_grad()
    scheduler.step()
""")]


BUG = Bug(
    id="accum-sched",
    title="Schedule stepped every micro-batch",
    difficulty="medium",
    observe=("The learning rate printed each epoch falls much faster than the schedule was designed for: the "
             "warm-up is over almost at once and the rate reaches its floor long before the last epoch, after "
             "which the loss stops improving."),
    hints=(
        "Count how many times the scheduler advances per epoch, and how many optimizer updates happen per epoch.",
        "With gradient accumulation, a batch from the loader and an optimizer update are no longer the same thing.",
        "The scheduler is stepped outside the block that makes the update.",
    ),
    why=("A schedule over optimizer steps (warm-up, cosine to a horizon of `total_steps` updates) must advance "
         "once per update. Stepped once per micro-batch it runs ACCUM times too fast: the warm-up is cut short "
         "and the rate reaches its minimum after 1/ACCUM of training."),
    fix="Call `scheduler.step()` right after the optimizer step, inside the block that runs every ACCUM micro-batches.",
    probes=("lr-schedule",),
    follow_up=(
        "If you do step per micro-batch, how must the schedule's horizon change?",
        "What happens to the schedule when a GradScaler skips a step?",
        "Which frameworks count `global_step` in updates and which in batches?",
    ),
    operator=StepPerMicroBatch(),
)
