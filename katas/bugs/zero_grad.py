"""zero-grad: the gradients are never reset between optimizer steps."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import MODEL, OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, remove_statements
from katas.engine.patterns import call_statement, loop_label, unreachable
from katas.engine.tree import method


class RemoveGradientReset(Operator):
    """Delete every ``zero_grad()`` on an optimizer or model that a training loop runs itself: in its body, or
    in a function or method of the file its body calls (a step function, ``self._run_batch(...)``, an LBFGS
    closure given to ``optimizer.step``), not through a training loop nested in it."""

    no_site = "it has no training loop that resets gradients with zero_grad()"

    def resets(self, ctx: Context, loop: cst.For | cst.While):
        others = set(ctx.training_loops()) - {loop}
        found = []
        for call in ctx.runs(loop.body, stop=others.__contains__):
            if method(call) != "zero_grad":
                continue
            statement, role = ctx.statement(call), ctx.role(call.func.value)
            if call_statement(statement) is call and role.kind in (OPTIMIZER, MODEL) and not unreachable(ctx, statement):
                found.append((statement, role))
        return found

    def sites(self, ctx: Context) -> list[Site]:
        return [
            Site(f"zero-grad:{ctx.where(loop)}:{loop_label(ctx, loop)}", loop, any(r.guessed for _, r in resets))
            for loop in ctx.training_loops()
            if (resets := self.resets(ctx, loop))
        ]

    def mutate(self, ctx: Context, site: Site):
        return remove_statements(ctx, [statement for statement, _ in self.resets(ctx, site.node)])

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
""",
            after="""\
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in loader:
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
""")]


BUG = Bug(
    id="zero-grad",
    title="Gradients never reset between steps",
    difficulty="easy",
    observe=("Training is unstable: the loss falls for a few steps, then lurches around or stalls, and "
             "changing the learning rate only changes how quickly it goes wrong."),
    hints=(
        "Every optimizer step should be driven by this step's batch. Is it?",
        "`backward()` does not overwrite `.grad`: look at what `.grad` holds when the next backward pass starts.",
        "Something that clears the gradients once per step is missing from the training loop.",
    ),
    why=("`loss.backward()` *adds* each new gradient into `.grad`. Unless the gradients are reset, every "
         "update applies the sum of all gradients so far, so old batches keep pushing the weights."),
    fix=("Call `optimizer.zero_grad(set_to_none=True)` once per step, before `backward()` or right after "
         "`optimizer.step()`. With deliberate gradient accumulation, reset after every k-th step instead."),
    probes=("grads-accumulate",),
    follow_up=(
        "Why does PyTorch accumulate gradients instead of overwriting them?",
        "How would you accumulate gradients over 4 micro-batches on purpose, and what must you divide by?",
        "What does set_to_none=True change compared with zeroing?",
    ),
    operator=RemoveGradientReset(),
)
