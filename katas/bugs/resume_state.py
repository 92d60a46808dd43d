"""resume-state: resuming from a checkpoint restores the model only; optimizer, scheduler and scaler start afresh."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, remove_statements
from katas.engine.patterns import call_statement

SAVE = ("torch.save",)


class ModelOnly(Operator):
    """Remove the ``load_state_dict`` lines of everything but the model in a block that resumes a checkpoint
    this script saves (a model's ``load_state_dict`` beside them)."""

    no_site = "it does not resume training state from a checkpoint it saves"

    def groups(self, ctx: Context):
        if not any(ctx.is_call_to(c, *SAVE) for c in ctx.all(cst.Call)):
            return
        blocks: dict = {}
        for call in ctx.calls(ctx.module, "load_state_dict"):
            statement = ctx.statement(call)
            if call_statement(statement) is call:
                blocks.setdefault(ctx.parents[statement], []).append((statement, ctx.role(call.func.value).kind))
        for block, lines in blocks.items():
            others = [s for s, kind in lines if kind != MODEL]
            if others and len(others) < len(lines):
                yield others

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"resume-state:{ctx.where(lines[0])}:{ctx.code(lines[0])}", lines[0]) for lines in self.groups(ctx)]

    def mutate(self, ctx: Context, site: Site):
        lines = next(lines for lines in self.groups(ctx) if lines[0] is site.node)
        return remove_statements(ctx, lines)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pt")
state = torch.load("ckpt.pt")
model.load_state_dict(state["model"])
optimizer.load_state_dict(state["optimizer"])
""",
            after="""\
import torch

torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.pt")
state = torch.load("ckpt.pt")
model.load_state_dict(state["model"])
""")]


BUG = Bug(
    id="resume-state",
    title="Resume restores the weights only",
    difficulty="medium",
    observe=("Right after training resumes from its checkpoint the loss jumps up, and the learning rate printed "
             "after the resume is not where it was when the checkpoint was written."),
    hints=(
        "Print the optimizer's state and the learning rate at the last update before the checkpoint and at "
        "the first update after the resume.",
        "Weights are not the only thing that changes during training. What else carries over from step to step?",
        "Only part of what the checkpoint should restore is loaded.",
    ),
    why=("Adam's moment estimates, its step count (for bias correction), the scheduler's position and the "
         "GradScaler's scale are training state too. Restored weights with a fresh optimizer make the first "
         "updates behave like the very first ones (large, uncorrected steps), and a fresh scheduler restarts "
         "the warm-up in the middle of training."),
    fix=("Save and load the optimizer's, the scheduler's and the scaler's `state_dict()` along with the "
         "model's, and load each into the freshly built object before training continues."),
    probes=("resume-state",),
    follow_up=(
        "What else would an exact resume need (RNG states, the sampler's epoch, the data position)?",
        "Why is rebuilding the scheduler with `last_epoch=N` not enough?",
        "When is loading only the weights the right thing to do?",
    ),
    operator=ModelOnly(),
)
