"""target-grad: a loss's target (a TD target, a teacher's outputs) is computed with autograd on.

Sites: what keeps a loss's target out of autograd, where the loss is backpropagated: a ``with torch.no_grad():``
(``inference_mode``, ``set_grad_enabled(False)``) around a model call whose result flows into the target argument
of a loss (``F.smooth_l1_loss(q, target)``, ``criterion(student, teacher_probs)``), through assignments and the
file's own functions' return values; the same switch as a decorator of such a function; or a ``.detach()`` of a
model's output on that flow. The edit removes the switch (the body dedented) or the ``.detach()``: the target is
computed with a graph into the network that made it.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.no_shuffle import reads, targets
from katas.bugs.val_grad import evaluates, switches_off_grad, without_decorator, without_with
from katas.catalogue import Bug
from katas.engine.context import MODEL, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import in_training, innermost_training_loops, steps_in
from katas.engine.tree import find, is_self_attribute, method

FUNCTIONS = {f"torch.nn.functional.{name}" for name in (
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "nll_loss")}
MODULES = {f"{prefix}.{name}" for prefix in ("torch.nn", "torch.nn.modules.loss") for name in (
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
    "NLLLoss")}


def is_loss(ctx: Context, call: cst.Call) -> bool:
    """A loss function of ``torch.nn.functional``, or a loss module (built in the call, or where the name it is
    called through is assigned)."""
    if ctx.qualified_names(call.func) & FUNCTIONS:
        return True
    if isinstance(call.func, cst.Call):
        return bool(ctx.qualified_names(call.func.func) & MODULES)
    key = ctx.binding(call.func)
    return key is not None and any(
        isinstance(a.value, cst.Call) and ctx.qualified_names(a.value.func) & MODULES
        for a in ctx.all(cst.Assign) if any(ctx.binding(t) == key for t in written(a)))


def written(assign: cst.Assign | cst.AnnAssign | cst.AugAssign) -> list[cst.BaseExpression]:
    found = [assign.target] if not isinstance(assign, cst.Assign) else [t.target for t in assign.targets]
    return [t for node in found for t in targets(node)]


def target_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The second positional argument of a loss call, or ``target=``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > 1:
        return positional[1].value
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "target"), None)


class TargetFlow:
    """What a backpropagated loss's target is computed from: the names and ``self`` attributes it reads, through
    their assignments, and the file's functions whose return value it reads, transitively."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.keys: set = set()
        self.functions: set[cst.FunctionDef] = set()
        self.exprs: list[cst.BaseExpression] = []  # every expression the targets are computed by
        assigned: dict = {}
        for node in [*ctx.all(cst.Assign), *ctx.all(cst.AnnAssign), *ctx.all(cst.AugAssign)]:
            if node.value is not None:
                for t in written(node):
                    key = ctx.binding(t)
                    if key is not None:
                        assigned.setdefault(key, []).append(node.value)
        loops = set(ctx.training_loops())
        todo = [target for call in ctx.all(cst.Call) if is_loss(ctx, call)
                and (target := target_argument(call)) is not None
                and (in_training(ctx, call, loops) or steps_in(ctx, call))]
        while todo:
            expr = todo.pop()
            self.exprs.append(expr)
            for key in reads(ctx, expr) - self.keys:
                self.keys.add(key)
                todo += assigned.get(key, [])
            for call in find(expr, cst.Call):
                for function in ctx.callees(call):
                    if function not in self.functions:
                        self.functions.add(function)
                        todo += [r.value for r in find(function, cst.Return)
                                 if r.value is not None and ctx.enclosing(r, cst.FunctionDef) is function]

    def feeds(self, block: cst.CSTNode) -> bool:
        """Whether ``block`` assigns a value the targets read, or returns one."""
        ctx = self.ctx
        for node in [*find(block, cst.Assign), *find(block, cst.AnnAssign), *find(block, cst.AugAssign)]:
            if any(ctx.binding(t) in self.keys for t in written(node)):
                return True
        return any(ctx.enclosing(r, cst.FunctionDef) in self.functions for r in find(block, cst.Return))


def forwards(ctx: Context, root: cst.CSTNode) -> bool:
    """Whether running ``root`` calls a model (directly, or in the file's functions it calls) and no backward."""
    calls = [*([root] if isinstance(root, cst.Call) else []), *ctx.runs(root)]
    return any(ctx.role(c.func).kind == MODEL or held_callable(ctx, c.func) for c in calls) \
        and not any(method(c) == "backward" for c in calls)


def assigned_by(ctx: Context, name: cst.CSTNode) -> cst.CSTNode | None:
    """What writes ``name``: the assignment target it is (an element of a tuple of one included)."""
    node = ctx.parents.get(name)
    while isinstance(node, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        node = ctx.parents.get(node)
    return node


def held_callable(ctx: Context, func: cst.BaseExpression) -> bool:
    """A call of a value rather than of a function or a method: a parameter or an assigned name (``q_target(s)``),
    or a ``self`` attribute that is assigned and is no method of the class (``self.target_q(s)``): a model held
    by a name that does not say so."""
    if isinstance(func, cst.Name):
        bound = ctx.bound_to(func)
        return bool(bound) and all(isinstance(b, cst.Param) or isinstance(assigned_by(ctx, b), (cst.AssignTarget,
                                                                                               cst.AnnAssign))
                                   for b in bound)
    if is_self_attribute(func):
        cls = ctx.enclosing(func, cst.ClassDef)
        key = ctx.binding(func)
        return cls is not None and not any(f.name.value == func.attr.value for f in find(cls, cst.FunctionDef)) \
            and any(ctx.binding(t) == key for a in ctx.all(cst.Assign) for t in written(a))
    return False


class TargetWithGrad(Operator):
    """Compute a loss's target with autograd on: remove the ``no_grad`` around it, or its ``.detach()``."""

    no_site = ("no loss that is backpropagated takes a target computed by a model under torch.no_grad() or "
               "detached from it")

    def sites(self, ctx: Context) -> list[Site]:
        flow = TargetFlow(ctx)
        inner = set(innermost_training_loops(ctx, through_calls=False))
        found = []
        for node in ctx.all(cst.With):  # part of a training step (an evaluation's no_grad is val-grad's site)
            item = next((i for i in node.items if switches_off_grad(ctx, i.item)), None)
            if item is not None and flow.feeds(node.body) and forwards(ctx, node.body) \
                    and not find(node.body, cst.For, cst.While) and not evaluates(ctx, node.body, inner):
                found.append(Site(f"target-grad:{ctx.where(node)}:with {ctx.code(item.item)}", node))
        for function in flow.functions:
            decorator = next((d for d in function.decorators if switches_off_grad(ctx, d.decorator)), None)
            if decorator is not None and forwards(ctx, function.body) and not evaluates(ctx, function.body, inner):
                found.append(Site(f"target-grad:{ctx.where(decorator)}:@{ctx.code(decorator.decorator)}", decorator))
        for expr in flow.exprs:
            for call in find(expr, cst.Call):
                if method(call) == "detach" and not call.args and forwards(ctx, call.func.value):
                    found.append(Site(f"target-grad:{ctx.where(call)}:.detach()", call))
        return list({id(site.node): site for site in found}.values())  # an expression read twice is one site

    def mutate(self, ctx: Context, site: Site):
        if isinstance(site.node, cst.Decorator):
            return without_decorator(ctx, site.node)
        if isinstance(site.node, cst.Call):
            return rewrite(ctx.module, {site.node: lambda call: call.func.value})
        return without_with(ctx, site.node)

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch
import torch.nn.functional as F


def td_loss(q_net, target_net, s, a, r, s2, done):
    q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        best_next = target_net(s2).max(dim=1).values
    return F.smooth_l1_loss(q, r + GAMMA * (1 - done) * best_next)


for s, a, r, s2, done in batches:
    loss = td_loss(q_net, target_net, s, a, r, s2, done)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
            after="""\
import torch
import torch.nn.functional as F


def td_loss(q_net, target_net, s, a, r, s2, done):
    q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
    best_next = target_net(s2).max(dim=1).values
    return F.smooth_l1_loss(q, r + GAMMA * (1 - done) * best_next)


for s, a, r, s2, done in batches:
    loss = td_loss(q_net, target_net, s, a, r, s2, done)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""), Example(
            before="""\
import torch.nn.functional as F

for x, y in loader:
    soft = F.softmax(teacher_model(x).detach() / T, dim=1)
    loss = F.kl_div(F.log_softmax(student_model(x) / T, dim=1), soft, reduction="batchmean")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
            after="""\
import torch.nn.functional as F

for x, y in loader:
    soft = F.softmax(teacher_model(x) / T, dim=1)
    loss = F.kl_div(F.log_softmax(student_model(x) / T, dim=1), soft, reduction="batchmean")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""")]


BUG = Bug(
    id="target-grad",
    title="Target computed with gradient",
    difficulty="medium",
    observe=("The script learns exactly as the correct one does, figure for figure. But each update costs more than "
             "it should, and after training the target network's weights have a .grad that grew at every update."),
    hints=(
        "After a few updates, look at `.grad` of the second network's weights. Should they have one at all?",
        "Which tensors does the backward pass of the loss reach? Follow each argument of the loss back to the "
        "weights it was computed from.",
        "The TD target is computed with autograd on: the backward pass runs through the target network too and "
        "fills gradients that no optimizer ever uses.",
    ),
    why=("A loss's target is a constant of that loss: the prediction moves toward it, not the other way round. "
         "Computed with autograd on, it keeps a graph into the network that made it (the target network, a "
         "teacher), so every backward pass also runs through that network, its activations stay alive until then, "
         "and its weights' .grad grows without end. Where the target comes from the trained network itself (no "
         "target network), the gradient also pulls the target toward the prediction: a different, slower algorithm "
         "(residual gradients) than the TD update."),
    fix=("Compute the target under `with torch.no_grad():` (or `torch.inference_mode()`, or decorate the function "
         "that computes it with `@torch.no_grad()`), `.detach()` it, or freeze the target network once with "
         "`target_net.requires_grad_(False)`."),
    probes=("target-grad",),
    follow_up=(
        "Why must the TD target not backpropagate into the online network, even when there is no target network?",
        "What is the difference between `.detach()`, `torch.no_grad()` and `requires_grad_(False)` here?",
        "In knowledge distillation, what does running the teacher with gradients cost, and what does it change?",
    ),
    operator=TargetWithGrad(),
)
