"""inner-inplace: the inner step of a meta-learning loop is written in place on the meta-parameters.

Sites: a fast-weight update ``params = {name: p - step for (name, p), g in zip(params.items(), grads)}`` (or the
list form ``params = [p - step for p, g in zip(params, grads)]``) in a function that takes the gradient with
``torch.autograd.grad``. The edit replaces it by a loop that subtracts the same step from each tensor's ``.data``:
``params`` keeps the tensors it held, so where it starts as the model's own parameters every inner step lands in
them.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find

AUTOGRAD_GRAD = ("torch.autograd.grad",)


class WriteInnerStepInPlace(Operator):
    """Replace a fast-weight comprehension ``p - lr * g`` by ``p.data -= lr * g`` over the same tensors."""

    no_site = "no fast weights are made as p - step over zip(params, grads) next to torch.autograd.grad"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for assign in ctx.all(cst.Assign):
            parts = fast_weight_update(assign)
            function = ctx.enclosing(assign, cst.FunctionDef)
            if parts is None or function is None:
                continue
            if any(ctx.is_call_to(call, *AUTOGRAD_GRAD) for call in find(function, cst.Call)):
                found.append(Site(f"inner-inplace:{ctx.where(assign)}:{assign.targets[0].target.value}",
                                  ctx.statement(assign)))
        return found

    def mutate(self, ctx: Context, site: Site):
        param, grad, tensors, grads, step = fast_weight_update(site.node.body[0])
        loop = cst.parse_statement(f"for {param}, {grad} in zip(_, _):\n    {param}.data -= _\n")
        line = loop.body.body[0]
        loop = loop.with_changes(iter=loop.iter.with_changes(args=[cst.Arg(tensors), cst.Arg(grads)]),
                                 body=loop.body.with_changes(body=[line.with_changes(body=[
                                     line.body[0].with_changes(value=step)])]))
        return rewrite(ctx.module, {site.node: lambda node: loop.with_changes(leading_lines=node.leading_lines)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def adapt(model, loss_fn, lr=0.05):
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(loss_fn(params), list(params.values()), create_graph=True)
    params = {name: p - lr * g for (name, p), g in zip(params.items(), grads)}
    return params
""",
            after="""\
import torch


def adapt(model, loss_fn, lr=0.05):
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(loss_fn(params), list(params.values()), create_graph=True)
    for p, g in zip(params.values(), grads):
        p.data -= lr * g
    return params
"""), Example(
            before="""\
import torch


def inner_step(weights, loss, lr):
    grads = torch.autograd.grad(loss, weights, create_graph=True)
    weights = [w - lr * g for w, g in zip(weights, grads)]
    return weights
""",
            after="""\
import torch


def inner_step(weights, loss, lr):
    grads = torch.autograd.grad(loss, weights, create_graph=True)
    for w, g in zip(weights, grads):
        w.data -= lr * g
    return weights
""")]


def fast_weight_update(assign: cst.Assign):
    """``(p, g, tensors, grads, step)`` of ``X = {k: p - step for (k, p), g in zip(X.items(), grads)}`` or
    ``X = [p - step for p, g in zip(X, grads)]`` (the tensors: ``X.values()`` or ``X``), else None."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    name = assign.targets[0].target.value
    value = assign.value
    if isinstance(value, cst.DictComp):
        element = value.value
    elif isinstance(value, cst.ListComp):
        element = value.elt
    else:
        return None
    loop = value.for_in
    if loop.inner_for_in is not None or loop.ifs or not isinstance(element, cst.BinaryOperation) \
            or not isinstance(element.operator, cst.Subtract) or not isinstance(element.left, cst.Name):
        return None
    if not (isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "zip"
            and len(loop.iter.args) == 2 and isinstance(loop.target, cst.Tuple) and len(loop.target.elements) == 2):
        return None
    first, grad = (e.value for e in loop.target.elements)
    tensors_in, grads = (a.value for a in loop.iter.args)
    if not isinstance(grad, cst.Name):
        return None
    param = element.left.value
    if isinstance(value, cst.DictComp):  # (name, p), g over zip(X.items(), grads)
        if not (isinstance(first, cst.Tuple) and len(first.elements) == 2 and isinstance(first.elements[1].value, cst.Name)
                and first.elements[1].value.value == param and is_method_of(tensors_in, name, "items")):
            return None
        tensors = cst.Call(func=cst.Attribute(value=cst.Name(name), attr=cst.Name("values")))
    else:  # p, g over zip(X, grads)
        if not (isinstance(first, cst.Name) and first.value == param and isinstance(tensors_in, cst.Name)
                and tensors_in.value == name):
            return None
        tensors = cst.Name(name)
    return param, grad.value, tensors, grads, element.right


def is_method_of(expr: cst.BaseExpression, name: str, method: str) -> bool:
    return isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
        and isinstance(expr.func.value, cst.Name) and expr.func.value.value == name and expr.func.attr.value == method


BUG = Bug(
    id="inner-inplace",
    title="Inner step written into the meta-parameters",
    difficulty="medium",
    observe=("The meta-loss jumps around instead of falling and the adapted model's validation loss barely "
             "improves; every evaluation leaves the model a little different from before it."),
    hints=(
        "Print one weight of the model before and after adapting to a single task. Should adapting to a task "
        "change the model?",
        "The meta-update starts from the weights the optimizer holds. What have those weights been through by "
        "the time it runs?",
        "The inner steps are applied to the model's own parameters through .data: every task's adaptation stays "
        "in the meta-parameters, and autograd never sees it.",
    ),
    why=("MAML keeps two sets of weights apart: the meta-parameters the optimizer trains, and per-task fast "
         "weights p - lr g made from them. Writing the inner step into p.data merges them: each task's adaptation "
         "(and each evaluation task's) is left in the meta-parameters, the next task starts from there, and the "
         "meta-update is applied on top of all of it. Through .data autograd records nothing, so the meta-gradient "
         "is taken at the last adapted point and no longer differentiates through the adaptation either."),
    fix=("Build new tensors for the fast weights (params = {name: p - lr * g ...}) and run the model on them with "
         "torch.func.functional_call, or adapt a copy of the model per task; the meta-parameters change only in "
         "optimizer.step()."),
    probes=("inner-steps",),
    follow_up=(
        "Why does `.data` hide this from autograd, where an in-place op on the parameter would raise?",
        "How would you adapt a model with BatchNorm buffers per task without touching the meta-model's?",
        "What does test-time adaptation (TENT) change in place, and why is that intended there?",
    ),
    operator=WriteInnerStepInPlace(),
)
