"""train-mode: after the first validation pass, training continues in evaluation mode."""
from __future__ import annotations

from katas.bugs.eval_mode import eval_statements
from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, remove_statements
from katas.engine.patterns import method_statements, runs_after


class RemoveTrainMode(Operator):
    """Delete one ``model.train()`` in a script that also switches the model to evaluation mode.

    Not one that changes nothing: when every switch to evaluation mode is followed by another ``model.train()``
    (as in ``evaluate(): model.eval() ... model.train()``), the model is in training mode whenever that one runs.
    """

    no_site = "it never switches the model back to training mode after evaluating"

    def sites(self, ctx: Context) -> list[Site]:
        evals = [s for s, _ in eval_statements(ctx)]
        switches = [(s, r) for s, r in method_statements(ctx, ctx.module, {"train"}, {MODEL})
                    if not s.body[0].value.args or ctx.code(s.body[0].value.args[0].value) == "True"]
        lines = {s for s, _ in switches}
        restoring = [lines.intersection(runs_after(ctx, e)) for e in evals]  # the switches back after each eval
        return [Site(f"train-mode:{ctx.where(s)}:{ctx.code(s)}", s, role.guessed) for s, role in switches
                if any(restores <= {s} for restores in restoring)]

    def mutate(self, ctx: Context, site: Site):
        return remove_statements(ctx, [site.node])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for epoch in range(epochs):
    model.train()
    train_epoch(model, train_loader)
    model.eval()
    evaluate(model, val_loader)
""",
            after="""\
for epoch in range(epochs):
    train_epoch(model, train_loader)
    model.eval()
    evaluate(model, val_loader)
""")]


BUG = Bug(
    id="train-mode",
    title="Training continues in evaluation mode",
    difficulty="medium",
    observe=("The first epoch trains normally. From the second epoch on the training loss drops "
             "suspiciously fast while validation stops improving, as if regularisation had been switched off."),
    hints=(
        "What is different about the first epoch compared with all the later ones?",
        "Something happens at the end of every epoch that the training loop never undoes.",
        "Dropout and batch norm stay in evaluation mode once validation has run.",
    ),
    why=("`model.eval()` is sticky: it stays in effect until something calls `model.train()`. Without that, every "
         "epoch after the first trains with dropout off and batch norm frozen on its running statistics."),
    fix="Call `model.train()` at the start of every training epoch (and `model.eval()` before validating).",
    probes=("train-mode",),
    follow_up=(
        "Why is it safer to set the mode at the start of each phase than to restore it at the end?",
        "When would you deliberately keep BatchNorm in eval mode while training?",
    ),
    operator=RemoveTrainMode(),
)
