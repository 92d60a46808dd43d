"""softmax-ce: a softmax (or sigmoid) applied before a loss that expects raw scores."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import KEEPS_ROLE, MODEL, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import NO_GRAD, bound_arguments
from katas.engine.tree import find, method

CROSS_ENTROPY, BINARY = "cross-entropy", "binary"
FUNCTIONS = {"torch.nn.functional.cross_entropy": CROSS_ENTROPY,
             "torch.nn.functional.binary_cross_entropy_with_logits": BINARY}
CLASSES = {"torch.nn.CrossEntropyLoss": CROSS_ENTROPY, "torch.nn.modules.loss.CrossEntropyLoss": CROSS_ENTROPY,
           "torch.nn.BCEWithLogitsLoss": BINARY, "torch.nn.modules.loss.BCEWithLogitsLoss": BINARY}
SET_GRAD = {"torch.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"}
ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
DEPTH = 6  # calls into the file's own functions followed to find the backward pass a loss reaches


class SquashScores(Operator):
    """At a cross-entropy loss on raw scores that training backpropagates (``F.cross_entropy``, an
    ``nn.CrossEntropyLoss`` instance), apply ``.softmax(dim=1)`` to its input; at a binary one
    (``F.binary_cross_entropy_with_logits``, ``nn.BCEWithLogitsLoss``), ``.sigmoid()``."""

    no_site = "it has no cross-entropy loss on raw scores in its training"

    def sites(self, ctx: Context) -> list[Site]:
        losses = [(call, kind) for call, kind in loss_calls(ctx) if score_argument(call) is not None
                  and not without_grad(ctx, call)]
        trained = [(call, kind) for call, kind in losses if feeds_backward(ctx, call)]
        if not trained:  # the data flow was not followed: a loss called inside a loop that runs backward()
            loops = ctx.training_loops()
            trained = [(call, kind) for call, kind in losses if any(a in loops for a in ctx.ancestors(call))]
        return [Site(f"softmax-ce:{ctx.where(call)}:{ctx.code(call)}", call) for call, _ in trained]

    def mutate(self, ctx: Context, site: Site):
        kind = dict(loss_calls(ctx))[site.node]
        argument = score_argument(site.node)
        return rewrite(ctx.module, {argument: lambda node: squashed(node, kind)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch.nn.functional as F

for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
""",
            after="""\
import torch.nn.functional as F

for x, y in loader:
    opt.zero_grad()
    loss = F.cross_entropy(net(x).softmax(dim=1), y)
    loss.backward()
    opt.step()
"""), Example(
            before="""\
from torch import nn


class Trainer:
    def __init__(self, model, loss_fn):
        self.model, self.loss_fn = model, loss_fn

    def step(self, x, y):
        return self.loss_fn(self.model(x) / self.temperature, y)

    def fit(self, batches):
        for x, y in batches:
            self.step(x, y).backward()


Trainer(net, nn.BCEWithLogitsLoss(pos_weight=w)).fit(batches)
""",
            after="""\
from torch import nn


class Trainer:
    def __init__(self, model, loss_fn):
        self.model, self.loss_fn = model, loss_fn

    def step(self, x, y):
        return self.loss_fn((self.model(x) / self.temperature).sigmoid(), y)

    def fit(self, batches):
        for x, y in batches:
            self.step(x, y).backward()


Trainer(net, nn.BCEWithLogitsLoss(pos_weight=w)).fit(batches)
""")]


# -- which calls are losses on raw scores ---------------------------------------


def constructed(ctx: Context, expr: cst.BaseExpression) -> str | None:
    """The kind of loss ``expr`` builds: ``nn.CrossEntropyLoss(...)``, also through ``.to(device)``."""
    if not isinstance(expr, cst.Call):
        return None
    if method(expr) in KEEPS_ROLE:
        return constructed(ctx, expr.func.value)
    return next((CLASSES[q] for q in ctx.qualified_names(expr.func) if q in CLASSES), None)


def loss_objects(ctx: Context) -> dict:
    """Names and ``self`` attributes bound to a loss module, by where it is built, through assignments and calls
    into the file's own functions, classes (``__init__``) and methods (argument → parameter), like roles."""
    bound: dict = {}

    def kind_of(expr: cst.BaseExpression) -> str | None:
        found = ctx.binding(expr)
        return bound.get(found) if found is not None else constructed(ctx, expr)

    def bind(target: cst.BaseExpression, kind: str | None) -> None:
        found = ctx.binding(target)
        if kind and found is not None:
            bound.setdefault(found, kind)

    assigns = [*ctx.all(cst.Assign), *ctx.all(cst.AnnAssign)]
    calls = [(call, callee, offset) for call in ctx.all(cst.Call) for callee, offset in callees(ctx, call)]
    for _ in range(10):
        before = dict(bound)
        for node in assigns:
            if node.value is None:
                continue
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Tuple) and isinstance(node.value, cst.Tuple):
                    for t, v in zip(target.elements, node.value.elements):
                        bind(t.value, kind_of(v.value))
                else:
                    bind(target, kind_of(node.value))
        for call, callee, offset in calls:
            for param, arg in bound_arguments(call, callee, offset):
                bind(param.name, kind_of(arg.value))
        if bound == before:
            return bound
    return bound


def callees(ctx: Context, call: cst.Call) -> list[tuple[cst.FunctionDef, int]]:
    """The file's own functions a call may run, each with the number of leading parameters it fills itself
    (``self``): ``f(...)``, ``Trainer(...)`` (its ``__init__``), ``x.method(...)``."""
    if isinstance(call.func, cst.Name):
        name = call.func.value
        cls = next((c for c in ctx.all(cst.ClassDef) if c.name.value == name), None)
        if cls is not None:
            init = methods_of(cls).get("__init__")
            return [(init, 1)] if init is not None else []
        function = ctx.functions.get(name)
        return [(function, 0)] if function is not None and ctx.enclosing(function, cst.ClassDef) is None else []
    name = method(call)
    return [(f, 1) for c in ctx.all(cst.ClassDef) if (f := methods_of(c).get(name)) is not None] if name else []


def methods_of(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    return {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}


def loss_calls(ctx: Context) -> list[tuple[cst.Call, str]]:
    """Calls of a loss that takes raw scores: the functional form, or a loss module built in the file."""
    bound = loss_objects(ctx)
    found = []
    for call in ctx.all(cst.Call):
        kind = next((FUNCTIONS[q] for q in ctx.qualified_names(call.func) if q in FUNCTIONS), None)
        if kind is None:
            found_key = ctx.binding(call.func)
            kind = bound.get(found_key) if found_key is not None else constructed(ctx, call.func)
        if kind is not None:
            found.append((call, kind))
    return found


def score_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The scores a loss call is given: its first positional argument, or ``input=``."""
    if call.args and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "input"), None)


def squashed(node: cst.BaseExpression, kind: str) -> cst.Call:
    """``node.softmax(dim=1)`` (``node.sigmoid()`` for a binary loss), parenthesised where precedence needs it."""
    if not isinstance(node, ATOMS) and not getattr(node, "lpar", None):
        node = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    if kind == BINARY:
        return cst.Call(func=cst.Attribute(value=node, attr=cst.Name("sigmoid")))
    return cst.Call(func=cst.Attribute(value=node, attr=cst.Name("softmax")),
                    args=[cst.Arg(keyword=cst.Name("dim"), value=cst.Integer("1"),
                                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                        whitespace_after=cst.SimpleWhitespace("")))])


# -- which of them training backpropagates ----------------------------------------


def without_grad(ctx: Context, node: cst.CSTNode) -> bool:
    """Inside ``with torch.no_grad():`` (``inference_mode``, ``set_grad_enabled(False)``) or a function decorated so."""
    for a in ctx.ancestors(node):
        if isinstance(a, cst.With) and any(disables_grad(ctx, item.item) for item in a.items):
            return True
        if isinstance(a, cst.FunctionDef) and any(disables_grad(ctx, d.decorator) for d in a.decorators):
            return True
    return False


def disables_grad(ctx: Context, expr: cst.BaseExpression) -> bool:
    func = expr.func if isinstance(expr, cst.Call) else expr
    names = ctx.qualified_names(func)
    if names & NO_GRAD:
        return True
    return bool(names & SET_GRAD) and isinstance(expr, cst.Call) and bool(expr.args) \
        and ctx.code(expr.args[0].value) == "False"


def feeds_backward(ctx: Context, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Whether the value of ``expr`` reaches a backward pass: inside ``(...).backward()`` (or
    ``torch.autograd.backward``, ``accelerator.backward(...)``), through names it is assigned to, and through
    ``return`` into the callers of its function (``forward`` of a model: its calls)."""
    statement = ctx.statement(expr)
    for a in ctx.ancestors(expr):
        if a is statement:
            break
        if isinstance(a, cst.Call) and is_backward(ctx, a):
            return True
    small = next((a for a in [expr, *ctx.ancestors(expr)]
                  if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Return, cst.Expr))), None)
    function = ctx.enclosing(expr, cst.FunctionDef)
    if isinstance(small, cst.Return):
        return function is not None and returned_to_backward(ctx, function, depth)
    if not isinstance(small, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        return False
    scope = function or ctx.module
    tainted = keys_of(ctx, small)
    assigns = find(scope, cst.Assign, cst.AugAssign, cst.AnnAssign)
    while True:
        grown = set(tainted)
        for node in assigns:
            if node.value is not None and mentions(ctx, node.value, tainted):
                grown |= keys_of(ctx, node)
        if grown == tainted:
            break
        tainted = grown
    owner = ctx.enclosing(scope, cst.ClassDef) if function is not None else None
    searched = [scope] + ([owner] if owner is not None and any(k.startswith("self.") for k in tainted) else [])
    for root in searched:
        for call in find(root, cst.Call):
            if is_backward(ctx, call) and mentions(ctx, call, tainted):
                return True
    returns = [r for r in find(scope, cst.Return) if r.value is not None and mentions(ctx, r.value, tainted)]
    return bool(returns) and function is not None and returned_to_backward(ctx, function, depth)


def returned_to_backward(ctx: Context, function: cst.FunctionDef, depth: int) -> bool:
    """Whether what ``function`` returns reaches a backward pass at one of its calls in the file."""
    if depth >= DEPTH:
        return False
    name = function.name.value
    cls = ctx.enclosing(function, cst.ClassDef)
    if cls is None:
        callers = [c for c in ctx.all(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == name]
    else:
        callers = [c for c in ctx.all(cst.Call) if method(c) == name]
        if name in ("forward", "__call__") and ctx.is_module_class(cls.name.value):
            callers += [c for c in ctx.all(cst.Call) if not isinstance(c.func, cst.Call) and ctx.role(c.func).kind == MODEL
                        and not ctx.role(c.func).guessed]
    return any(feeds_backward(ctx, c, depth + 1) for c in callers if not without_grad(ctx, c))


def is_backward(ctx: Context, call: cst.Call) -> bool:
    return method(call) == "backward" or ctx.is_call_to(call, "torch.autograd.backward")


def keys_of(ctx: Context, node: cst.Assign | cst.AugAssign | cst.AnnAssign) -> set[str]:
    """What an assignment writes: ``loss``, ``self.loss``, ``out["loss"]`` and ``out``; each element of a tuple."""
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    keys: set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets += [e.value for e in target.elements]
            continue
        if isinstance(target, cst.StarredElement):
            targets.append(target.value)
            continue
        keys.add(ctx.code(target))
        if isinstance(target, cst.Subscript):
            targets.append(target.value)
    return keys


def mentions(ctx: Context, node: cst.CSTNode, keys: set[str]) -> bool:
    """Whether ``node`` reads one of ``keys`` (an attribute's or a keyword's own name is not a read of that name)."""
    for n in find(node, cst.Name, cst.Attribute, cst.Subscript):
        parent = ctx.parents.get(n)
        if isinstance(n, cst.Name) and (isinstance(parent, cst.Attribute) and parent.attr is n
                                        or isinstance(parent, cst.Arg) and parent.keyword is n):
            continue
        if ctx.code(n) in keys:
            return True
    return False


BUG = Bug(
    id="softmax-ce",
    title="Softmax before a loss that expects logits",
    difficulty="medium",
    observe=("Nothing crashes and accuracy climbs, but slowly, and the training loss levels off far above zero "
             "even once nearly every example is classified correctly; the model's confidence in its answers stays low."),
    hints=(
        "What is the smallest value this loss could reach, given what the model hands it? Is it near zero?",
        "Print the exact tensor the loss function receives at one step: its range, and the sum of each row.",
        "The loss normalises its input itself; look at what was already done to the scores before they reach it.",
    ),
    why=("`F.cross_entropy` and `nn.CrossEntropyLoss` apply `log_softmax` to their input themselves (the "
         "`*_with_logits` losses apply `logsigmoid`). Given probabilities, they squash them a second time: scores "
         "confined to [0, 1] differ by at most 1, so even a perfect prediction keeps a loss of about "
         "ln(1 + (k - 1)/e) for k classes, and the gradients pass through the softmax's Jacobian and shrink as the "
         "model grows confident. Training still works, but slowly, with a loss that plateaus and unconfident outputs; "
         "over a language model's vocabulary (28 characters: a floor of 2.39 nats) it hardly learns at all."),
    fix=("Pass the raw scores (logits) to `F.cross_entropy` / `nn.CrossEntropyLoss` (and to "
         "`BCEWithLogitsLoss`). Apply `softmax` (or `sigmoid`) only where probabilities are needed, outside the loss, "
         "e.g. for reporting; or use `log_softmax` with `nll_loss`."),
    probes=("logit-input",),
    follow_up=(
        "Why do PyTorch's classification losses take logits rather than probabilities? What does fusing "
        "log and softmax buy numerically?",
        "For accuracy you take the argmax: does it matter whether you apply softmax first?",
        "When you distil with a temperature, where does the softmax go, and where the log_softmax?",
        "How would the plateau of the loss tell you the number of classes?",
    ),
    operator=SquashScores(),
)
