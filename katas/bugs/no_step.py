"""no-step: the optimizer never steps, so the gradients computed every batch never reach the weights."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context, Role
from katas.engine.operator import Example, Operator, Site, remove_statements, rewrite
from katas.engine.patterns import call_statement, in_training, later_siblings
from katas.engine.tree import method


def step_of(ctx: Context, statement: cst.CSTNode) -> tuple[Role, cst.BaseExpression | None] | None:
    """(the optimizer's role, the GradScaler or None) when ``statement`` is ``optimizer.step()``,
    ``optimizer.step(closure)`` or ``scaler.step(optimizer)``."""
    call = call_statement(statement)
    if method(call) != "step":
        return None
    owner = call.func.value
    role = ctx.role(owner)
    if role.kind == OPTIMIZER:
        return (role, None) if not call.args or closure_of(ctx, call) is not None else None
    if call.args and call.args[0].keyword is None and (role := ctx.role(call.args[0].value)).kind == OPTIMIZER:
        return role, owner
    return None


def closure_of(ctx: Context, call: cst.Call) -> cst.BaseExpression | None:
    """The closure ``optimizer.step(closure)`` is given (positional, or ``closure=``) when it is a name; else None."""
    if method(call) != "step" or ctx.role(call.func.value).kind != OPTIMIZER or len(call.args) != 1:
        return None
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "closure":
        return None
    return arg.value if isinstance(arg.value, (cst.Name, cst.Attribute)) else None


def scaler_update(ctx: Context, statement: cst.CSTNode, scaler: cst.BaseExpression) -> cst.CSTNode | None:
    """The ``scaler.update()`` line after ``scaler.step(optimizer)`` that would fail without the step.

    ``GradScaler.update()`` asserts that an inf check ran since the last update: without the step, only an
    ``unscale_`` makes that check. None when an ``unscale_`` on the same scaler comes before the step in its loop
    (or function), or no such ``update()`` follows.
    """
    name = ctx.code(scaler)
    body = ctx.enclosing(statement, (cst.For, cst.While, cst.FunctionDef))
    unscales = [c for c in ctx.calls(body.body if body is not None else ctx.module, "unscale_")
                if ctx.code(c.func.value) == name]
    if unscales:
        return None
    return next((s for s in later_siblings(ctx, statement)
                 if method(call_statement(s)) == "update" and ctx.code(call_statement(s).func.value) == name), None)


class RemoveOptimizerStep(Operator):
    """Delete one optimizer step a training loop runs: ``optimizer.step()``, or ``scaler.step(optimizer)`` where
    a GradScaler steps it (with the ``scaler.update()`` after it when no ``unscale_`` would let that run); a step
    with a closure (LBFGS: ``optimizer.step(closure)``) becomes the closure's call, which still computes the loss
    and its gradients."""

    no_site = "it has no optimizer.step() (or scaler.step(optimizer)) in a training loop"

    def steps(self, ctx: Context):
        loops = set(ctx.training_loops())
        for call in ctx.calls(ctx.module, "step"):
            statement = ctx.statement(call)
            found = step_of(ctx, statement)
            if found is not None and in_training(ctx, statement, loops):
                yield statement, *found

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"no-step:{ctx.where(statement)}:{ctx.code(statement)}", statement, role.guessed)
                for statement, role, _ in self.steps(ctx)]

    def mutate(self, ctx: Context, site: Site):
        closure = closure_of(ctx, call_statement(site.node))
        if closure is not None:
            return rewrite(ctx.module, {call_statement(site.node): lambda _: cst.Call(func=closure)})
        scaler = next(scaler for statement, _, scaler in self.steps(ctx) if statement is site.node)
        update = scaler_update(ctx, site.node, scaler) if scaler is not None else None
        return remove_statements(ctx, [site.node] + ([update] if update is not None else []))

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    print(loss.item())
""",
            after="""\
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    print(loss.item())
""")]


BUG = Bug(
    id="no-step",
    title="The optimizer never steps",
    difficulty="easy",
    observe=("The training loss stays flat from the first batch to the last, the validation numbers do not move "
             "from one epoch to the next, and raising or lowering the learning rate changes nothing at all."),
    hints=(
        "Compare the model's weights before training and after it. Did they move?",
        "Gradients are computed at every batch. Follow them: what is supposed to read `.grad` afterwards?",
        "Something that applies the gradients to the weights is missing from the training loop.",
    ),
    why=("`loss.backward()` only computes gradients and stores them in `.grad`; it never changes a weight. "
         "The optimizer's `step()` is what reads `.grad` and updates the parameters. Without it every batch "
         "computes gradients that are thrown away at the next `zero_grad()`, and the model stays as initialised."),
    fix=("Call `optimizer.step()` after `loss.backward()` (and after clipping), once per batch, or once every k "
         "batches with deliberate gradient accumulation. With a GradScaler, call `scaler.step(optimizer)` and "
         "then `scaler.update()`."),
    probes=("weights-update",),
    follow_up=(
        "How would you write a unit test that catches a training step that does not train?",
        "With a GradScaler, why does `scaler.step(optimizer)` sometimes not step at all?",
        "What does `optimizer.step()` do with a parameter whose `.grad` is None, for SGD and for AdamW?",
    ),
    operator=RemoveOptimizerStep(),
)
