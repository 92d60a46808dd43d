"""eval-mode: validation runs with the model still in training mode."""
from __future__ import annotations

from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, remove_statements
from katas.engine.patterns import method_statements

EVAL_CALLS = {"eval"}


def eval_statements(ctx: Context):
    """Lines that switch a model to evaluation mode: ``model.eval()`` or ``model.train(False)``."""
    found = [(s, r) for s, r in method_statements(ctx, ctx.module, EVAL_CALLS, {MODEL}) if not s.body[0].value.args]
    for statement, role in method_statements(ctx, ctx.module, {"train"}, {MODEL}):
        args = statement.body[0].value.args
        if len(args) == 1 and ctx.code(args[0].value) == "False":
            found.append((statement, role))
    return found


class RemoveEvalMode(Operator):
    """Delete one line that switches the model to evaluation mode."""

    no_site = "it never switches a model to evaluation mode"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"eval-mode:{ctx.where(s)}:{ctx.code(s)}", s, role.guessed) for s, role in eval_statements(ctx)]

    def mutate(self, ctx: Context, site: Site):
        return remove_statements(ctx, [site.node])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
@torch.no_grad()
def validate(net: nn.Module, batches):
    net.eval()
    return sum((net(x).argmax(1) == y).sum().item() for x, y in batches)
""",
            after="""\
@torch.no_grad()
def validate(net: nn.Module, batches):
    return sum((net(x).argmax(1) == y).sum().item() for x, y in batches)
""")]


BUG = Bug(
    id="eval-mode",
    title="Validation in training mode",
    difficulty="easy",
    observe=("Validation numbers are noisy and pessimistic: scoring the same weights twice gives different "
             "results, and validating changes what the model predicts afterwards."),
    hints=(
        "Some layers behave differently during training and evaluation. Which does this model have?",
        "Check what mode the model is in while the validation batches run.",
        "Dropout is still dropping, and batch norm still uses batch statistics and updates its running ones.",
    ),
    why=("In training mode, dropout zeroes random activations and batch norm normalises with the current "
         "batch's statistics while updating its running averages. Validation in that mode is random, biased, "
         "and it changes the model."),
    fix="Call `model.eval()` (or `model.train(False)`) before validating, and `model.train()` before training again.",
    probes=("eval-mode",),
    follow_up=(
        "What exactly changes in BatchNorm between train() and eval()?",
        "Is torch.no_grad() a substitute for model.eval()? What does each do?",
        "Why can validation loss come out lower than training loss even when everything is correct?",
    ),
    operator=RemoveEvalMode(),
)
