"""leak: the running loss is accumulated as a tensor, so every step's graph stays alive."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import innermost_training_loops
from katas.engine.tree import find, method


class KeepLossTensor(Operator):
    """In a training loop, turn ``total += loss.item()`` (or ``float(loss)``) into ``total += loss``; where the loop
    accumulates what a step function of the file returns (``output, loss = train(x, y)`` then ``total += loss``,
    the step returning ``loss.item()``), make the step return the tensor."""

    no_site = "its training loop does not accumulate the loss with .item() or float()"

    def losses(self, ctx: Context, loop: cst.For | cst.While | cst.FunctionDef) -> set[str]:
        """The names and attributes (``loss``, ``self.loss``) that a ``.backward()`` in the loop (or function) starts
        from."""
        return {ctx.code(n) for call in ctx.calls(loop.body, "backward")
                for n in find(call.func.value, cst.Name, cst.Attribute)}

    def conversions(self, ctx: Context, loop: cst.For | cst.While) -> list[tuple[cst.CSTNode, cst.Call]]:
        """(accumulating statement, conversion call) in the loop."""
        losses = self.losses(ctx, loop)
        found = []
        for node in find(loop.body, cst.AugAssign, cst.Call):
            if isinstance(node, cst.Call) and method(node) != "append":
                continue
            for call in find(node, cst.Call):
                loss = self.converted(call)
                if loss is not None and ctx.code(loss) in losses:
                    found.append((node, call))
        return found

    def returned(self, ctx: Context, loop: cst.For | cst.While) -> list[tuple[cst.CSTNode, cst.Call]]:
        """(accumulating statement, conversion call in a step function's ``return``) for ``total += loss`` in the
        loop, where ``loss`` was bound in the loop from a call of a function of the file that backwards a loss and
        returns it converted (``return output, loss.item()``)."""
        found = []
        for node in find(loop.body, cst.AugAssign):
            accumulated = {n.value for n in find(node.value, cst.Name)}
            for assign in find(loop.body, cst.Assign):
                bound = {n.value for t in assign.targets for n in find(t.target, cst.Name)}
                if not isinstance(assign.value, cst.Call) or not bound & accumulated:
                    continue
                for function in ctx.callees(assign.value):
                    losses = self.losses(ctx, function)
                    found += [(node, call) for ret in find(function, cst.Return) for call in find(ret, cst.Call)
                              if (loss := self.converted(call)) is not None and ctx.code(loss) in losses]
        return found

    @staticmethod
    def converted(call: cst.Call) -> cst.BaseExpression | None:
        """``x`` when ``call`` is ``x.item()`` or ``float(x)``, with ``x`` a name or an attribute."""
        if method(call) == "item" and not call.args:
            value = call.func.value
        elif isinstance(call.func, cst.Name) and call.func.value == "float" and len(call.args) == 1 \
                and call.args[0].keyword is None:
            value = call.args[0].value
        else:
            return None
        return value if isinstance(value, (cst.Name, cst.Attribute)) else None

    def sites(self, ctx: Context) -> list[Site]:
        found = {call: node for loop in innermost_training_loops(ctx)
                 for node, call in self.conversions(ctx, loop) + self.returned(ctx, loop)}
        return [Site(f"leak:{ctx.where(node)}:{ctx.code(node)}", call) for call, node in found.items()]

    def mutate(self, ctx: Context, site: Site):
        loss = self.converted(site.node)
        return rewrite(ctx.module, {site.node: lambda _: loss})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    running += float(loss)
""",
            after="""\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    running += loss
""")]


BUG = Bug(
    id="leak",
    title="Loss accumulated as a tensor",
    difficulty="easy",
    observe=("Memory use climbs with every step and is only released when the epoch ends; on a larger "
             "model the run dies with an out-of-memory error part-way through an epoch."),
    hints=(
        "Something created at every step is not freed at the end of the step. What does each step build?",
        "Look at the values that survive from one step to the next, such as running totals.",
        "A loss tensor still holds its autograd graph. Adding it to a running total keeps that graph alive.",
    ),
    why=("A loss tensor references the graph that produced it. `total += loss` makes `total` a tensor whose "
         "graph links to every step's graph, so none of them can be freed until `total` is."),
    fix="Accumulate a Python number: `total += loss.item()` (or `float(loss)`, or `loss.detach()`).",
    probes=("graphs-retained",),
    follow_up=(
        "Why does memory not grow after backward() frees the activations, yet the graphs still leak?",
        "When is .detach() preferable to .item() for logging on a GPU?",
        "Would gc.collect() help? Why not?",
    ),
    operator=KeepLossTensor(),
)
