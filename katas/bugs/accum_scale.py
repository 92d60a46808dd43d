"""accum-scale: gradient accumulation sums the micro-batch losses instead of averaging them."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, remove_statements, rewrite
from katas.engine.patterns import BLOCKS
from katas.engine.tree import method, single_name_target


def accumulation_count(ctx: Context, expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is the script's accumulation count: it gates the step (``i % ACCUM``) or counts the
    micro-batches (``range(ACCUM)``)."""
    code = ctx.code(expr)
    if isinstance(expr, (cst.Integer, cst.Float)):
        return False
    if any(isinstance(op.operator, cst.Modulo) and ctx.code(op.right) == code for op in ctx.all(cst.BinaryOperation)):
        return True
    return any(isinstance(c.func, cst.Name) and c.func.value == "range" and any(ctx.code(a.value) == code for a in c.args)
               for c in ctx.all(cst.Call))


def divided(ctx: Context, expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide)
            and accumulation_count(ctx, expr.right))


def last_assignment(lines: list[cst.CSTNode], name: str) -> cst.SimpleStatementLine | None:
    """The last ``name = ...`` line among ``lines``, looking into the ``with`` blocks among them (``with autocast():``
    runs its body once, in line)."""
    for line in reversed(lines):
        if single_name_target(line) == name:
            return line
        if isinstance(line, cst.With) and (found := last_assignment(list(line.body.body), name)) is not None:
            return found
    return None


class SumMicroBatches(Operator):
    """Drop the division by the accumulation count: in ``scaler.scale(loss / ACCUM).backward()``,
    ``(loss / ACCUM).backward()``, or a ``loss = loss / ACCUM`` line before the backward (also inside a ``with``
    block before it: ``with autocast(): ...``)."""

    no_site = "it does not divide the loss by a gradient-accumulation count before the backward pass"

    def backwarded(self, ctx: Context):
        """(backward call, the expression backwarded: the argument of ``scaler.scale(...)`` or the receiver)."""
        for call in ctx.calls(ctx.module, "backward"):
            value = call.func.value
            while isinstance(value, cst.Call) and method(value) == "scale" and value.args:
                value = value.args[0].value
            yield call, value

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for call, value in self.backwarded(ctx):
            if divided(ctx, value):
                found.append(Site(f"accum-scale:{ctx.where(call)}:{ctx.code(ctx.statement(call))}", value))
            elif isinstance(value, cst.Name):
                statement = ctx.statement(call)
                block = ctx.parents.get(statement)
                if not isinstance(block, BLOCKS):
                    continue
                line = last_assignment(list(block.body)[:list(block.body).index(statement)], value.value)
                if line is not None:
                    assign = line.body[0]
                    if divided(ctx, assign.value) and ctx.code(assign.value.left) == value.value:
                        found.append(Site(f"accum-scale:{ctx.where(call)}:{ctx.code(line)}", line))
        return found

    def mutate(self, ctx: Context, site: Site):
        if isinstance(site.node, cst.SimpleStatementLine):
            return remove_statements(ctx, [site.node])
        return rewrite(ctx.module, {site.node: lambda node: node.left.with_changes(
            lpar=node.left.lpar if node.left.lpar else (), rpar=node.left.rpar if node.left.rpar else ())})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    scaler.scale(loss / ACCUM).backward()
    if (i + 1) % ACCUM == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
            after="""\
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    if (i + 1) % ACCUM == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""")]


BUG = Bug(
    id="accum-scale",
    title="Accumulated micro-batch losses summed, not averaged",
    difficulty="medium",
    observe=("Training with gradient accumulation behaves differently from training with the equivalent large "
             "batch: the gradient norms logged before clipping are several times larger, and changing the "
             "number of accumulation steps changes how training goes."),
    hints=(
        "Compare the gradient applied after K micro-batches with the gradient of one batch K times as large.",
        "Each backward pass adds to `.grad`. What does K additions of a mean give?",
        "The loss handed to each micro-batch's backward pass is not scaled for the accumulation.",
    ),
    why=("`backward()` adds each micro-batch's gradient into `.grad`, so after K micro-batches `.grad` holds "
         "their sum: K times the gradient of the equivalent large batch's mean loss. Clipping thresholds and "
         "learning rates tuned for a batch no longer mean the same thing, SGD steps K times too far, and "
         "changing K changes training. Adam hides most of it (it is nearly scale-invariant), which is why "
         "the bug survives."),
    fix=("Divide each micro-batch's loss by the number of accumulation steps before its backward pass "
         "(`scaler.scale(loss / ACCUM).backward()`), or divide the gradients by it once before clipping and "
         "the step. Dividing the learning rate instead is not the same: the clip and Adam see the summed "
         "gradient."),
    probes=("accum-mean",),
    follow_up=(
        "With a token-level loss and micro-batches of different token counts, what should each micro-batch's "
        "loss be divided by?",
        "Why does Adam largely hide this bug while SGD does not?",
        "How does a missing division interact with gradient clipping?",
    ),
    operator=SumMicroBatches(),
)
