"""bptt-leak: the recurrent state carried from chunk to chunk keeps its graph, so every backward pass runs back
through the whole stream.

Planted where it stays silent: without the cut, a second backward through the previous chunk raises
("Trying to backward through the graph a second time"), which ``retain_graph=True`` silences; an optimizer's
in-place step would then raise again ("modified by an inplace operation"), so the operator only applies to
loops that update the weights by hand through ``.data`` (no ``.step()`` in the loop), as the classic
word-language-model example does. Not registered in the catalogue while no reference has such a loop.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import innermost_training_loops
from katas.engine.tree import method, names


class KeepHiddenGraph(Operator):
    """Remove ``hidden = hidden.detach()`` (or a helper that detaches, or ``hidden.detach_()``) from a training
    loop that feeds ``hidden`` to a call, and pass ``retain_graph=True`` to the loop's ``.backward()``."""

    no_site = ("its training loop does not cut a carried state with .detach() before feeding it back, or it "
               "steps an optimizer (whose in-place update would make the missing cut raise, not leak)")

    def detaching_helpers(self, ctx: Context) -> set[str]:
        return {name for name, function in ctx.functions.items()
                if any(method(call) == "detach" for call in ctx.calls(function))}

    def cut(self, ctx: Context, statement: cst.CSTNode, helpers: set[str]) -> str | None:
        """The state's name when ``statement`` is ``h = h.detach()``, ``h = helper(h)`` or ``h.detach_()``."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and method(small.value) == "detach_" \
                and isinstance(small.value.func.value, cst.Name):
            return small.value.func.value.value
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, cst.Call)):
            return None
        name, call = small.targets[0].target.value, small.value
        if method(call) == "detach" and not call.args and isinstance(call.func.value, cst.Name) \
                and call.func.value.value == name:
            return name
        if isinstance(call.func, cst.Name) and call.func.value in helpers and len(call.args) == 1 \
                and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name:
            return name
        return None

    def candidates(self, ctx: Context):
        helpers = self.detaching_helpers(ctx)
        for loop in innermost_training_loops(ctx):
            if ctx.calls(loop.body, "step"):
                continue
            if not any(method(c) in ("add_", "sub_") and ctx.code(c.func.value).endswith(".data")
                       for c in ctx.calls(loop.body)):
                continue
            for statement in loop.body.body:
                name = self.cut(ctx, statement, helpers)
                if name and any(arg for call in ctx.calls(loop.body) for arg in call.args
                                if names(arg.value, name) and ctx.statement(call) is not statement):
                    yield loop, statement

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"bptt-leak:{ctx.where(statement)}:{ctx.code(statement)}", statement)
                for _, statement in self.candidates(ctx)]

    def mutate(self, ctx: Context, site: Site):
        loop = next(loop for loop, statement in self.candidates(ctx) if statement is site.node)
        retain = cst.Arg(keyword=cst.Name("retain_graph"), value=cst.Name("True"),
                         equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                               whitespace_after=cst.SimpleWhitespace("")))
        edits = {call: (lambda c: c.with_changes(args=[*c.args, retain]))
                 for call in ctx.calls(loop.body, "backward")
                 if not any(a.keyword is not None and a.keyword.value == "retain_graph" for a in call.args)}
        body = loop.body

        def without(block: cst.IndentedBlock) -> cst.IndentedBlock:
            index = list(body.body).index(site.node)
            statements = list(block.body)
            removed = statements.pop(index)
            carried = list(removed.leading_lines)
            comment = removed.trailing_whitespace.comment
            if comment is not None:
                carried.append(cst.EmptyLine(comment=comment))
            if index < len(statements):
                statements[index] = statements[index].with_changes(
                    leading_lines=[*carried, *statements[index].leading_lines])
            return block.with_changes(body=statements or [cst.SimpleStatementLine([cst.Pass()])])

        edits[body] = without
        return rewrite(ctx.module, edits)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for i in range(0, data.size(0) - 1, bptt):
    x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt]
    hidden = hidden.detach()
    out, hidden = model(x, hidden)
    loss = criterion(out.view(-1, ntokens), y.view(-1))
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
""",
            after="""\
for i in range(0, data.size(0) - 1, bptt):
    x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt]
    out, hidden = model(x, hidden)
    loss = criterion(out.view(-1, ntokens), y.view(-1))
    model.zero_grad()
    loss.backward(retain_graph=True)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
""")]


BUG = Bug(
    id="bptt-leak",
    title="Recurrent state carried with its graph",
    difficulty="medium",
    observe=("Each chunk of the stream takes longer to train than the one before, and memory grows until the "
             "epoch ends; the loss itself looks fine."),
    hints=(
        "Time each step of an epoch: what could make step 30 slower than step 3 on inputs of the same size?",
        "What does the backward pass of one chunk run through? Follow the recurrent state back to where it "
        "was made.",
        "The hidden state handed to the next chunk still remembers how it was computed, all the way back to "
        "the start of the epoch; retain_graph=True only hid the error that told you so.",
    ),
    why=("Truncated backpropagation through time keeps the RNN's state across chunks but cuts its history: "
         "`hidden = hidden.detach()`. Without the cut, chunk k's graph hangs on chunk k - 1's, so each backward "
         "pass runs through every chunk since the start (quadratic time, linear memory) and adds gradients "
         "computed against weights that have since changed. The error PyTorch raises about a second backward is "
         "the symptom; `retain_graph=True` only silences it."),
    fix="Cut the state at each chunk: `hidden = hidden.detach()` (for an LSTM, detach both h and c), and drop "
        "`retain_graph=True`.",
    probes=("graph-span",),
    follow_up=(
        "Why does an optimizer's step make the missing detach raise, while a hand-written .data update does not?",
        "What does the truncation length trade off? How would you backpropagate through two chunks?",
        "Why would gc.collect() not help here?",
    ),
    operator=KeepHiddenGraph(),
)
