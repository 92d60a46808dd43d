"""data-inplace: a scaling in a model's forward done in place through ``.data``, where autograd cannot see it."""
from __future__ import annotations

import libcst as cst

from katas.bugs.detach import called_from_forward, module_classes
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, is_self_attribute, method

OPERATORS = {cst.Multiply: "mul_", cst.Divide: "div_"}
SIZES = {"size", "dim", "numel"}  # tensor methods that return plain integers
NUMBERS = {"float", "int", "len", "abs", "min", "max", "round"}
DEPTH = 4  # names followed through their assignments to decide that an expression is a plain number


def assignment(statement: cst.CSTNode) -> cst.Assign | None:
    """The assignment, when ``statement`` is a line ``name = value`` (one target, a plain name)."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        node = statement.body[0]
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            return node
    return None


def own_statements(function: cst.FunctionDef) -> list[cst.SimpleStatementLine]:
    """The lines of ``function`` in source order, those of nested functions and classes left out."""
    found = []

    def visit(node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, cst.SimpleStatementLine):
                found.append(child)
            else:
                visit(child)

    visit(function.body)
    return found


def loop_modules(function: cst.FunctionDef) -> set[str]:
    """Loop variables over a submodule container: ``block`` in ``for block in self.blocks:``."""
    return {loop.target.value for loop in find(function, cst.For)
            if isinstance(loop.target, cst.Name) and is_self_attribute(loop.iter)}


def runs_a_module(value: cst.BaseExpression, blocks: set[str], tracked: set[str]) -> bool:
    """Whether ``value`` calls a submodule (``self.x(...)``, ``block(...)``) or reads a name that holds such a result."""
    for node in find(value, cst.Call, cst.Name):
        if isinstance(node, cst.Call) and (is_self_attribute(node.func)
                                           or isinstance(node.func, cst.Name) and node.func.value in blocks):
            return True
        if isinstance(node, cst.Name) and node.value in tracked:
            return True
    return False


class Scalars:
    """Which expressions are plain numbers: literals, ``math`` functions and constants, sizes of tensors, and names
    (locals, module constants, ``self`` attributes) every assignment of which is such an expression."""

    def __init__(self, ctx: Context, cls: cst.ClassDef, function: cst.FunctionDef):
        self.ctx = ctx
        self.assigned: dict[tuple[str, str], list[cst.BaseExpression]] = {}
        self.settings: set[str] = set()  # parameters of __init__: hyperparameters
        methods = [f for f in cls.body.body if isinstance(f, cst.FunctionDef)]
        init = next((f for f in methods if f.name.value == "__init__"), None)
        module_lines = [s for s in ctx.module.body if isinstance(s, cst.SimpleStatementLine)]
        for scope, statements in (("local", own_statements(function)), ("global", module_lines),
                                  ("init", own_statements(init) if init is not None else [])):
            for statement in statements:
                node = assignment(statement)
                if node is not None:
                    self.assigned.setdefault((scope, node.targets[0].target.value), []).append(node.value)
        if init is not None:
            self.settings = {p.name.value for p in init.params.params[1:]}
        for method_def in methods:
            for node in find(method_def, cst.Assign):
                for target in node.targets:
                    if is_self_attribute(target.target):
                        self.assigned.setdefault(("self", target.target.attr.value), []).append(node.value)
        self.params = {p.name.value for p in [*function.params.params, *function.params.kwonly_params]}

    def scalar(self, expr: cst.BaseExpression, depth: int = 0, init: bool = False) -> bool:
        if depth > DEPTH:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return self.scalar(expr.expression, depth, init)
        if isinstance(expr, cst.BinaryOperation):
            return self.scalar(expr.left, depth, init) and self.scalar(expr.right, depth, init)
        if isinstance(expr, cst.Call):
            names = self.ctx.qualified_names(expr.func)
            if any(q.startswith("math.") for q in names) or (isinstance(expr.func, cst.Name)
                                                             and expr.func.value in NUMBERS):
                return all(self.scalar(a.value, depth, init) or method(a.value) in SIZES for a in expr.args)
            return method(expr) in SIZES
        if isinstance(expr, cst.Subscript):  # x.shape[-1]
            return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
        if isinstance(expr, cst.Attribute):
            if any(q.startswith("math.") for q in self.ctx.qualified_names(expr)):
                return True
            return is_self_attribute(expr) and self._all_scalar(("self", expr.attr.value), depth, init=True)
        if isinstance(expr, cst.Name):
            if init and expr.value in self.settings:
                return True
            scope = "init" if init else "local"
            if (scope, expr.value) in self.assigned or (not init and expr.value in self.params):
                return self._all_scalar((scope, expr.value), depth, init)
            return self._all_scalar(("global", expr.value), depth, init)
        return False

    def _all_scalar(self, key: tuple[str, str], depth: int, init: bool) -> bool:
        values = self.assigned.get(key)
        return bool(values) and all(self.scalar(v, depth + 1, init) for v in values)


def scaling(node: cst.Assign, scalars: Scalars) -> cst.BaseExpression | None:
    """The factor, when ``node`` is ``name = name * factor`` (``factor * name``, ``name / factor``) by a plain number."""
    name, value = node.targets[0].target.value, node.value
    if not isinstance(value, cst.BinaryOperation) or type(value.operator) not in OPERATORS:
        return None
    sides = [(value.left, value.right)]
    if isinstance(value.operator, cst.Multiply):
        sides.append((value.right, value.left))
    for own, factor in sides:
        if isinstance(own, cst.Name) and own.value == name and not own.lpar and scalars.scalar(factor):
            return factor
    return None


class EditThroughData(Operator):
    """In a module's ``forward`` (or a method of the module it calls), rewrite ``h = h * s`` (also ``h = s * h``,
    ``h = h / s``), where ``h`` holds a submodule's output and ``s`` is a plain number, as ``h.data.mul_(s)``
    (``h.data.div_(s)``): the same values, changed where autograd does not see it."""

    no_site = "no model's forward() rescales a submodule's output by a plain number (h = h * s, h = h / s)"

    def sites(self, ctx: Context) -> list[Site]:
        sites = []
        for cls, methods in module_classes(ctx):
            for function in called_from_forward(methods):
                blocks, tracked = loop_modules(function), set()
                scalars = Scalars(ctx, cls, function)
                for statement in own_statements(function):
                    node = assignment(statement)
                    if node is not None and node.targets[0].target.value in tracked and scaling(node, scalars):
                        sites.append(Site(f"data-inplace:{ctx.where(node)}:{ctx.code(node)}", node))
                    for assign in (n for n in statement.body if isinstance(n, cst.Assign)):
                        names = {n.value for t in assign.targets for n in find(t.target, cst.Name)
                                 if not isinstance(t.target, (cst.Attribute, cst.Subscript))}
                        if runs_a_module(assign.value, blocks, tracked):
                            tracked |= names
                        else:
                            tracked -= names
        return sites

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        node = site.node
        cls = ctx.enclosing(node, cst.ClassDef)
        function = ctx.enclosing(node, cst.FunctionDef)
        factor = scaling(node, Scalars(ctx, cls, function))
        if isinstance(factor, (cst.BinaryOperation, cst.UnaryOperation)) and factor.lpar:
            factor = factor.with_changes(lpar=[], rpar=[])
        target = node.targets[0].target.value
        call = cst.Call(func=cst.Attribute(value=cst.Attribute(value=cst.Name(target), attr=cst.Name("data")),
                                           attr=cst.Name(OPERATORS[type(node.value.operator)])),
                        args=[cst.Arg(factor)])
        return rewrite(ctx.module, {node: lambda _: cst.Expr(call)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import math

from torch import nn


class TokenEncoder(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.layer = nn.TransformerEncoderLayer(d_model, nhead=2, batch_first=True)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = x * math.sqrt(self.d_model)
        return self.layer(x)
""",
            after="""\
import math

from torch import nn


class TokenEncoder(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.layer = nn.TransformerEncoderLayer(d_model, nhead=2, batch_first=True)

    def forward(self, tokens):
        x = self.embed(tokens)
        x.data.mul_(math.sqrt(self.d_model))
        return self.layer(x)
"""), Example(
            before="""\
import torch


class Attention(torch.nn.Module):
    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores = scores / q.size(-1) ** 0.5
        return self.out(scores.softmax(dim=-1) @ v)
""",
            after="""\
import torch


class Attention(torch.nn.Module):
    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1)
        scores.data.div_(q.size(-1) ** 0.5)
        return self.out(scores.softmax(dim=-1) @ v)
""")]


BUG = Bug(
    id="data-inplace",
    title="A scaling done in place through .data",
    difficulty="hard",
    observe=("Nothing crashes, the loss falls and the model learns, so the script looks healthy. Yet its gradients "
             "are not the slope of the function it computes: nudge the weights a little along the gradient and the "
             "output moves by a different amount than the gradient predicts, and the early layers' gradients are "
             "larger than they should be."),
    hints=(
        "Compare autograd's gradient with a finite difference of the model's output. Do they agree?",
        "Which layers' gradients are off, and by what factor? Look in forward() just after them.",
        "Is every value forward() computes changed in a way autograd records? Look for `.data`.",
    ),
    why=("`tensor.data` is the same storage without autograd's bookkeeping: `h.data.mul_(s)` changes the forward's "
         "values, but no multiplication is recorded in the graph, so the backward pass skips the factor `s`. Every "
         "parameter before the scaling gets the gradient of another function (here larger by 1/s per scaled block). "
         "No error is raised, because `.data` edits bypass the version counter that normally catches in-place "
         "changes to tensors autograd needs. Adaptive optimizers like Adam hide much of the damage, since they "
         "rescale each parameter's step, but the direction of the update is still wrong."),
    fix=("Scale out of place so that autograd records it: `h = h * s` (or `h = h.mul(s)`); fold the factor into a "
         "layer's weights if you want it free. Never change a tensor that is part of the graph through `.data`."),
    probes=("grad-check",),
    follow_up=(
        "How does `torch.autograd.gradcheck` work, and why does it want float64?",
        "When is `.data` (or `.detach()` followed by an in-place op) legitimate, and what is the safer way "
        "(`torch.no_grad()`)?",
        "Why did in-place ops through `.data` not raise the 'modified by an inplace operation' error?",
        "Why does training with Adam still work when every gradient is off by a constant factor per layer?",
    ),
    operator=EditThroughData(),
)
