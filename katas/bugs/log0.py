"""log0: the epsilon or clamp that keeps a probability-space loss away from log(0) is removed."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, method, names

LOGS = {"torch.log", "torch.log2", "torch.log10", "math.log"}
CLAMPS = {"torch.clamp", "torch.clip", "torch.clamp_min"}
CLAMP_METHODS = {"clamp", "clip", "clamp_min"}


class RemoveEpsilon(Operator):
    """Remove the clamp, or the ``+ eps``, that guards the argument of a ``log``."""

    no_site = "it has no hand-written log of a probability guarded by a clamp or an epsilon"

    def guards(self, ctx: Context) -> list[cst.CSTNode]:
        found: list[cst.CSTNode] = []
        for call in ctx.all(cst.Call):
            if ctx.is_call_to(call, *LOGS) and call.args:
                argument = call.args[0].value
            elif method(call) == "log" and not call.args:
                argument = call.func.value
            else:
                continue
            found += self.guards_of(ctx, argument, call)
        return list(dict.fromkeys(found))

    def guards_of(self, ctx: Context, argument: cst.BaseExpression, log: cst.Call) -> list[cst.CSTNode]:
        if self.is_clamp(ctx, argument) or self.is_epsilon_sum(argument):
            return [argument]
        guards = [n for n in find(argument, cst.Call, cst.BinaryOperation) if n is not argument
                  and (self.is_clamp(ctx, n) or self.is_epsilon_sum(n))]
        function = ctx.enclosing(log, cst.FunctionDef) or ctx.module
        for name in {n.value for n in names(argument)}:
            for assign in [a for a in find(function, cst.Assign) if any(names(t.target, name) == [t.target] for t in a.targets)]:
                if self.is_clamp(ctx, assign.value) or self.is_epsilon_sum(assign.value):
                    guards.append(assign.value)
        return guards

    @staticmethod
    def is_clamp(ctx: Context, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Call) and (
            ctx.is_call_to(node, *CLAMPS) or method(node) in CLAMP_METHODS)

    @staticmethod
    def is_epsilon_sum(node: cst.CSTNode) -> bool:
        return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) and any(
            is_epsilon(side) for side in (node.left, node.right))

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"log0:{ctx.where(g)}:{ctx.code(g)}", g) for g in self.guards(ctx)]

    def mutate(self, ctx: Context, site: Site):
        function_form = self.is_clamp(ctx, site.node) and ctx.is_call_to(site.node, *CLAMPS)
        return rewrite(ctx.module, {site.node: lambda node: unguard(node, function_form)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def bce(logits, targets, eps=1e-7):
    p = torch.sigmoid(logits).clamp(eps, 1 - eps)
    return -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()
""",
            after="""\
import torch


def bce(logits, targets, eps=1e-7):
    p = torch.sigmoid(logits)
    return -(targets * torch.log(p) + (1 - targets) * torch.log(1 - p)).mean()
"""), Example(
            before="import torch\n\nloss = -(y * torch.log(p + EPS)).sum(1).mean()\n",
            after="import torch\n\nloss = -(y * torch.log(p)).sum(1).mean()\n")]


def is_epsilon(node: cst.CSTNode) -> bool:
    """A name like ``eps`` or a float literal below 1e-3."""
    if isinstance(node, cst.Name):
        return node.value.lower() in ("eps", "epsilon")
    return isinstance(node, cst.Float) and float(node.value) < 1e-3


def unguard(node: cst.CSTNode, function_form: bool) -> cst.BaseExpression:
    """``x.clamp(...)`` → ``x``; ``torch.clamp(x, ...)`` → ``x``; ``x + eps`` → ``x``."""
    if isinstance(node, cst.BinaryOperation):
        return node.left if is_epsilon(node.right) else node.right
    return node.args[0].value if function_form else node.func.value


BUG = Bug(
    id="log0",
    title="log(0) in a hand-written loss",
    difficulty="easy",
    observe="After a few dozen steps the loss prints as nan and never recovers; accuracy falls to chance.",
    hints=(
        "The loss is fine at first. What changes about the model's outputs as it becomes confident?",
        "Find the first step where the loss is not finite and print the probabilities going into the loss.",
        "A probability that rounds to exactly 0 or 1 meets a logarithm.",
    ),
    why=("In float32, sigmoid(z) is exactly 1.0 once z exceeds about 17, so log(1 - p) is log(0) = -inf; "
         "multiplied by a zero target it becomes NaN, and the NaN spreads through the gradients into every weight."),
    fix=("Keep probabilities inside (0, 1): clamp them to [eps, 1 - eps] or add an epsilon inside the log; "
         "better, compute the loss from logits with `F.binary_cross_entropy_with_logits` or `F.logsigmoid`."),
    probes=("non-finite",),
    follow_up=(
        "Why is a loss computed from logits numerically safer than one computed from probabilities?",
        "Would nan_to_num on the loss fix it? What happens to the gradients?",
        "Why can bf16 autocast make this worse, and where would you upcast?",
    ),
    operator=RemoveEpsilon(),
)
