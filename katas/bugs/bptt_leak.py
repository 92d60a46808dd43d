"""bptt-leak: the recurrent state carried from chunk to chunk keeps its graph, so every backward pass runs back
through the whole stream.

Two forms, chosen by the loop. Where the loop steps an optimizer, the cut is removed and nothing else: the second
chunk's backward runs into the first chunk's freed graph and raises ("Trying to backward through the graph a second
time"), which is what a learner meets in a real script. The classic way to silence that error, ``retain_graph=True``,
then raises again at the next in-place optimizer step, so the checker rejects it as a crash. Where the loop updates
the weights by hand through ``.data`` (the word-language-model shape), nothing raises once ``retain_graph=True`` is
there: the operator adds it, and the leak is silent (the graph-span probe sees it).
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, removal_edits, rewrite
from katas.engine.patterns import innermost_training_loops
from katas.engine.tree import find, method, names


class KeepHiddenGraph(Operator):
    """Remove ``hidden = hidden.detach()`` (or a helper that detaches, or ``hidden.detach_()``) from a training
    loop that feeds ``hidden`` to a call; where the loop updates weights through ``.data`` and steps no optimizer,
    also pass ``retain_graph=True`` to its ``.backward()`` so that the leak stays silent."""

    no_site = "its training loop does not cut a carried state with .detach() before feeding it back"

    def detaching_helpers(self, ctx: Context) -> set[str]:
        return {name for name, function in ctx.functions.items()
                if any(method(call) == "detach" for call in ctx.calls(function))}

    def cut(self, ctx: Context, statement: cst.CSTNode, helpers: set[str]) -> str | None:
        """The state's name when ``statement`` cuts it: ``h = h.detach()``, ``h = helper(h)``, ``h.detach_()``,
        ``h = tuple(s.detach() for s in h)`` (any expression of ``h`` that detaches), or one of those alone under an
        ``if`` (``if h is not None:``)."""
        if isinstance(statement, cst.If) and statement.orelse is None and isinstance(statement.body, cst.IndentedBlock) \
                and len(statement.body.body) == 1:
            name = self.cut(ctx, statement.body.body[0], helpers)
            return name if name and names(statement.test, name) else None
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        small = statement.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and method(small.value) == "detach_" \
                and isinstance(small.value.func.value, cst.Name):
            return small.value.func.value.value
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            return None
        name = small.targets[0].target.value
        calls = find(small.value, cst.Call)
        detaches = any(method(c) == "detach" or isinstance(c.func, cst.Name) and c.func.value in helpers for c in calls)
        return name if detaches and names(small.value, name) else None

    def candidates(self, ctx: Context):
        helpers = self.detaching_helpers(ctx)
        for loop in innermost_training_loops(ctx):
            for statement in loop.body.body:
                name = self.cut(ctx, statement, helpers)
                if name and any(arg for call in ctx.calls(loop.body) for arg in call.args
                                if names(arg.value, name) and ctx.statement(call) is not statement):
                    yield loop, statement

    @staticmethod
    def silent(ctx: Context, loop: cst.For | cst.While) -> bool:
        """Whether the loop updates weights by hand through ``.data`` and steps no optimizer."""
        return not ctx.calls(loop.body, "step") and any(
            method(c) in ("add_", "sub_") and ctx.code(c.func.value).endswith(".data") for c in ctx.calls(loop.body))

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
                 if not any(a.keyword is not None and a.keyword.value == "retain_graph" for a in call.args)
                 } if self.silent(ctx, loop) else {}
        return rewrite(ctx.module, {**edits, **removal_edits(ctx, [site.node], end_comments=True)})

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
"""), Example(
            before="""\
for step in range(chunks):
    x, y = get_batch(data, step)
    hidden = hidden.detach()
    logits, hidden = model(x, hidden)
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
            after="""\
for step in range(chunks):
    x, y = get_batch(data, step)
    logits, hidden = model(x, hidden)
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""")]


BUG = Bug(
    id="bptt-leak",
    title="Recurrent state carried with its graph",
    difficulty="medium",
    observe=("Training stops at its second chunk with a RuntimeError about going backward through a graph a "
             "second time. Where that error has been silenced, each chunk takes longer to train than the one "
             "before and memory grows until the epoch ends, while the loss itself looks fine."),
    hints=(
        "Which graph does the error mean, and what from the first chunk is still in use at the second? (Silenced: "
        "time each step of an epoch; what could make step 30 slower than step 3 on inputs of the same size?)",
        "What does the backward pass of one chunk run through? Follow the recurrent state back to where it "
        "was made.",
        "The hidden state handed to the next chunk still remembers how it was computed, all the way back to "
        "the start of the epoch; retain_graph=True would only hide the error that tells you so.",
    ),
    why=("Truncated backpropagation through time keeps the RNN's state across chunks but cuts its history: "
         "`hidden = hidden.detach()`. Without the cut, chunk k's graph hangs on chunk k - 1's, so each backward "
         "pass runs back into graphs already backpropagated and freed: PyTorch raises. `retain_graph=True` keeps "
         "them, and then every backward pass runs through every chunk since the start (quadratic time, linear "
         "memory) and adds gradients computed against weights that have since changed; an optimizer's in-place "
         "step makes that raise in turn, a hand-written `.data` update does not."),
    fix="Cut the state at each chunk: `hidden = hidden.detach()` (for an LSTM, detach both h and c), and no "
        "`retain_graph=True`.",
    probes=("graph-span",),
    follow_up=(
        "Why does an optimizer's step make retain_graph=True raise, while a hand-written .data update does not?",
        "What does the truncation length trade off? How would you backpropagate through two chunks?",
        "Why would gc.collect() not help here?",
    ),
    operator=KeepHiddenGraph(),
    raises=("lm",),
)
