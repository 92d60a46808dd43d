"""scheduler: a per-step learning-rate schedule is stepped once per epoch."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import LOOPS, SCHEDULER, Context
from katas.engine.operator import Example, Operator, Site, move_statement_after
from katas.engine.patterns import body_statement, innermost_training_loops, loop_label, runs_repeatedly


class StepPerEpoch(Operator):
    """Move the scheduler step out of the batch loop, to just after it, where an epoch loop around the batch
    loop (in the same function or in its callers) then steps it once per epoch. A guard that holds only the step
    (``if warmup is not None:``) moves with it; a block the step shares with the update (every ACCUM micro-batches:
    unscale, clip, optimizer step, zero_grad, scheduler step) stays, and only the step leaves it: moving the whole
    block would also take the optimizer step out of the loop, a different bug."""

    no_site = "it has no learning-rate scheduler stepped inside a batch loop that an epoch loop repeats"

    def steps(self, ctx: Context, loop: cst.For | cst.While):
        for call in ctx.calls(loop.body, "step"):
            role = ctx.role(call.func.value)
            if role.kind == SCHEDULER:
                yield moved_statement(ctx, call, loop.body), role

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"scheduler:{ctx.where(loop)}:{loop_label(ctx, loop)}:{ctx.code(statement)}", statement,
                     role.guessed)
                for loop in innermost_training_loops(ctx) if runs_repeatedly(ctx, loop)
                for statement, role in self.steps(ctx, loop)]

    def mutate(self, ctx: Context, site: Site):
        return move_statement_after(ctx, site.node, ctx.enclosing(site.node, LOOPS))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * len(loader))
for epoch in range(epochs):
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        sched.step()
""",
            after="""\
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * len(loader))
for epoch in range(epochs):
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    sched.step()
""")]


def moved_statement(ctx: Context, call: cst.Call, block: cst.IndentedBlock) -> cst.CSTNode:
    """The step's own line when it shares a nested block with other statements, else the loop's statement holding it."""
    top, own = body_statement(ctx, call, block), ctx.statement(call)
    parent = ctx.parents.get(own)
    if own is not top and isinstance(parent, cst.IndentedBlock) and len(parent.body) > 1:
        return own
    return top


BUG = Bug(
    id="scheduler",
    title="Per-step schedule stepped per epoch",
    difficulty="medium",
    observe=("The learning rate printed at the end of each epoch hardly moves from its starting value, and "
             "training is far slower than the schedule's warm-up and peak promise."),
    hints=(
        "Plot the learning rate against the optimizer step. Is it the curve the scheduler was built for?",
        "Count how many times the scheduler advances in an epoch, and how many steps it was told to expect.",
        "The scheduler is stepped at the wrong place relative to the batch loop.",
    ),
    why=("OneCycleLR, warm-up and cosine-over-steps schedules are defined over optimizer steps. Stepped once "
         "per epoch they only advance `epochs` times out of `total_steps`, so the rate stays near its start."),
    fix=("Call `scheduler.step()` right after `optimizer.step()`, inside the batch loop. Keep per-epoch "
         "schedulers such as StepLR outside it."),
    probes=("lr-schedule",),
    follow_up=(
        "Which schedulers are per-step and which per-epoch?",
        "Why does PyTorch warn when scheduler.step() comes before optimizer.step()?",
        "What should a checkpoint contain so that a resumed run continues the schedule?",
    ),
    operator=StepPerEpoch(),
)
