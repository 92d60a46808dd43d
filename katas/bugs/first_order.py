"""first-order: the inner gradient of a meta-learning step is taken without ``create_graph``.

Sites: a ``create_graph=True`` keyword given to ``torch.autograd.grad``, or a keyword ``=True`` given to a function of
the file that hands that parameter on to ``torch.autograd.grad`` as its ``create_graph``, in a file that runs a model on substituted
weights (``torch.func.functional_call``): the fast weights of MAML. The edit writes ``False``. A gradient
penalty's ``create_graph=True`` in a file without fast weights is not a site.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find

AUTOGRAD_GRAD = ("torch.autograd.grad",)
FUNCTIONAL_CALL = ("torch.func.functional_call", "torch.nn.utils.stateless.functional_call")


class TakeInnerGradientFirstOrder(Operator):
    """Turn ``create_graph=True`` into ``False`` where it reaches the inner gradient of a fast-weight update."""

    no_site = "no inner gradient is taken with create_graph=True for fast weights (torch.func.functional_call)"

    def sites(self, ctx: Context) -> list[Site]:
        if not any(ctx.is_call_to(call, *FUNCTIONAL_CALL) for call in ctx.all(cst.Call)):
            return []
        return [Site(f"first-order:{ctx.where(call)}:{ctx.code(call.func)}", arg)
                for call in ctx.all(cst.Call) for arg in call.args
                if arg.keyword is not None and is_true(arg.value) and creates_graph(ctx, call, arg.keyword.value)]

    def mutate(self, ctx: Context, site: Site):
        return rewrite(ctx.module, {site.node.value: lambda node: cst.Name("False")})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
from torch.func import functional_call


def adapt(model, x, y, lr=0.05):
    params = dict(model.named_parameters())
    loss = torch.nn.functional.mse_loss(functional_call(model, params, (x,)), y)
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
    return {name: p - lr * g for (name, p), g in zip(params.items(), grads)}
""",
            after="""\
import torch
from torch.func import functional_call


def adapt(model, x, y, lr=0.05):
    params = dict(model.named_parameters())
    loss = torch.nn.functional.mse_loss(functional_call(model, params, (x,)), y)
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=False)
    return {name: p - lr * g for (name, p), g in zip(params.items(), grads)}
""")]


def is_true(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"


def creates_graph(ctx: Context, call: cst.Call, keyword: str, depth: int = 0) -> bool:
    """``keyword`` of ``call`` is ``torch.autograd.grad``'s ``create_graph``, or a parameter of a function of the
    file that ``call`` runs and that hands it on as ``create_graph`` (through its own calls, a few levels)."""
    if ctx.is_call_to(call, *AUTOGRAD_GRAD):
        return keyword == "create_graph"
    if depth > 3:
        return False
    for function in ctx.callees(call):
        for inner in find(function, cst.Call):
            for arg in inner.args:
                if arg.keyword is not None and isinstance(arg.value, cst.Name) and arg.value.value == keyword \
                        and creates_graph(ctx, inner, arg.keyword.value, depth + 1):
                    return True
    return False


BUG = Bug(
    id="first-order",
    title="Meta-gradient without the inner steps' second-order term",
    difficulty="hard",
    observe=("Training runs and the meta-loss falls, a little more slowly than published MAML curves; the adapted "
             "model's validation loss ends somewhat higher. Nothing crashes and nothing is NaN."),
    hints=(
        "The meta-update trains the starting weights through the adaptation. How does the loss after adapting "
        "depend on where the adaptation started?",
        "Differentiate p - lr * g(p) with respect to p. Which part of that derivative needs the gradient g to "
        "have a graph of its own?",
        "The inner gradient is computed as a constant: autograd was not asked to record how it was made, so the "
        "meta-gradient cannot differentiate through it.",
    ),
    why=("The fast weights are p' = p - lr ∇L_support(p). The meta-gradient is (I - lr H) ∇L_query(p'), where H is "
         "the Hessian of the support loss. torch.autograd.grad returns ∇L_support as a plain tensor unless "
         "create_graph=True records the graph of the gradient computation itself; without it the term -lr H "
         "vanishes and the meta-gradient is just the query loss's gradient at the adapted weights (first-order "
         "MAML). It still trains, which is why the difference hides: the meta-update no longer learns weights "
         "that are easy to adapt, only weights that are good after adapting."),
    fix=("Take the inner gradient with create_graph=True during meta-training (evaluation can keep False: nothing "
         "is differentiated through it), or compute the inner step with torch.func.grad over a functional_call, "
         "whose gradient is differentiable. If the first-order approximation is intended, say so by name (FOMAML) "
         "so a reader does not take it for MAML."),
    probes=("meta-gradient",),
    follow_up=(
        "What does the second-order term cost in memory and time, and when is first-order MAML good enough?",
        "How does Reptile differ from first-order MAML?",
        "Why can evaluation adapt without create_graph while meta-training cannot?",
    ),
    operator=TakeInnerGradientFirstOrder(),
)
