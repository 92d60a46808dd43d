"""lr-high: the learning rate is a hundred times too large, where it is written as a number.

The number is found by structure: the ``lr`` an optimizer is built with (keyword or second positional argument), and
the peak a one-cycle or cyclic schedule built on it sets (which overrides the optimizer's), followed back through
names to where they are written: a literal in the call, a variable assigned one (an element of a tuple assignment
too), a function's parameter (its default, and what the file's calls of it pass), or an ``argparse`` option's default.
Every number found is multiplied by 100 in one edit; a learning rate computed from something else (a scaling rule,
a configuration file) is not a site.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import OPTIMIZER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find

FACTOR = 100
PEAK_SCHEDULES = {"torch.optim.lr_scheduler.OneCycleLR": ("max_lr", 1),
                  "torch.optim.lr_scheduler.CyclicLR": ("max_lr", 2)}  # keyword, position: the rate they set


class RaiseLearningRate(Operator):
    """Multiply the learning rate an optimizer (and a one-cycle or cyclic schedule over it) is given by 100, at the
    numbers it is written as."""

    no_site = "its optimizer's learning rate is not a number written in the file (or is not given at all)"

    def sites(self, ctx: Context) -> list[Site]:
        found = []
        for call in ctx.all(cst.Call):
            if ctx.constructed(call) != OPTIMIZER:
                continue
            numbers = self.numbers(ctx, argument(call, "lr", 1))
            if numbers:
                found.append(Site(f"lr-high:{ctx.where(call)}:{ctx.code(numbers[0])}", call))
        return found

    def numbers(self, ctx: Context, rate: cst.BaseExpression | None) -> list[cst.CSTNode]:
        """The literals the optimizer's rate, and the peak of a schedule built on the same rate, are written as."""
        own = resolve(ctx, rate)
        if not own:
            return []
        peaks = []
        for call in ctx.all(cst.Call):
            for schedule, (keyword, position) in PEAK_SCHEDULES.items():
                if ctx.is_call_to(call, schedule):
                    peak = resolve(ctx, argument(call, keyword, position))
                    if peak is None:
                        return []  # a peak written elsewhere would override the raised rate
                    peaks += peak
        return list(dict.fromkeys([*own, *peaks]))

    def mutate(self, ctx: Context, site: Site):
        numbers = self.numbers(ctx, argument(site.node, "lr", 1))
        return rewrite(ctx.module, {n: (lambda node: node.with_changes(value=raised(node.value))) for n in numbers})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
""",
            after="""\
import torch

optimizer = torch.optim.AdamW(model.parameters(), lr=0.03, weight_decay=0.1)
"""), Example(
            before="""\
import torch


def fit(model, loader, epochs=4, lr=1e-2):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=epochs * len(loader))
""",
            after="""\
import torch


def fit(model, loader, epochs=4, lr=1.0):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=epochs * len(loader))
""")]


def argument(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if len(positional) > position else None


def resolve(ctx: Context, expr: cst.BaseExpression | None, seen: frozenset = frozenset()) -> list[cst.CSTNode] | None:
    """The number literals ``expr`` takes its value from, or None where some value is not a literal of the file."""
    if expr is None or expr in seen:
        return None
    seen = seen | {expr}
    if isinstance(expr, (cst.Float, cst.Integer)):
        return [expr]
    if isinstance(expr, cst.Name):
        bound = ctx.bound_to(expr)
        if not bound:
            return None
        found: list[cst.CSTNode] = []
        for node in bound:
            values = values_of(ctx, node, seen)
            if values is None:
                return None
            found += values
        return found or None
    if isinstance(expr, cst.Attribute):
        return option_default(ctx, expr.attr.value, seen)
    return None


def values_of(ctx: Context, node: cst.CSTNode, seen: frozenset) -> list[cst.CSTNode] | None:
    """The literals a name's binding gives it: an assignment's value (its element, for a tuple), a parameter's
    default and what the file's calls pass for it."""
    if isinstance(node, cst.Param):
        return parameter_values(ctx, node, seen)
    indices = []  # the name's place in the nested tuples of its target, innermost first
    child, parent = node, ctx.parents.get(node)
    while isinstance(parent, cst.Element):
        nest = ctx.parents.get(parent)
        if not isinstance(nest, (cst.Tuple, cst.List)):
            return None
        indices.append(list(nest.elements).index(parent))
        child, parent = nest, ctx.parents.get(nest)
    if isinstance(parent, cst.AssignTarget):
        value = ctx.parents[parent].value
    elif isinstance(parent, cst.AnnAssign) and parent.target is child and parent.value is not None:
        value = parent.value
    else:
        return None
    for i in reversed(indices):
        if not isinstance(value, (cst.Tuple, cst.List)) or i >= len(value.elements) \
                or isinstance(value.elements[i], cst.StarredElement):
            return None
        value = value.elements[i].value
    return resolve(ctx, value, seen)


def parameter_values(ctx: Context, param: cst.Param, seen: frozenset) -> list[cst.CSTNode] | None:
    function = ctx.enclosing(param, cst.FunctionDef)
    if function is None:
        return None
    params = list(function.params.params)
    position = params.index(param) if param in params else None
    if position is not None and ctx.enclosing(function, cst.ClassDef) is not None and params \
            and params[0].name.value in ("self", "cls"):
        position -= 1  # a method's calls pass self implicitly
    found: list[cst.CSTNode] = []
    uses_default = not ctx.callers(function)
    for call in ctx.callers(function):
        passed = argument(call, param.name.value, position) if position is not None and position >= 0 else \
            argument(call, param.name.value, 10 ** 6)
        if passed is None:
            uses_default = True
            continue
        values = resolve(ctx, passed, seen)
        if values is None:
            return None
        found += values
    if uses_default:
        if param.default is None:
            return None
        values = resolve(ctx, param.default, seen)
        if values is None:
            return None
        found += values
    return found


def option_default(ctx: Context, dest: str, seen: frozenset) -> list[cst.CSTNode] | None:
    """The default of ``parser.add_argument("--dest", ..., default=<number>)``."""
    for call in ctx.all(cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            continue
        flags = [a.value.evaluated_value for a in call.args if a.keyword is None
                 and isinstance(a.value, cst.SimpleString)]
        if not any(isinstance(f, str) and f.lstrip("-").replace("-", "_") == dest for f in flags):
            continue
        default = argument(call, "default", 10 ** 6)
        return resolve(ctx, default, seen)
    return None


def raised(text: str) -> str:
    """A number literal's text, times FACTOR, written plainly: ``1e-2`` → ``1.0``, ``6e-3`` → ``0.6``."""
    value = float(text.replace("_", "")) * FACTOR
    written = f"{value:.12g}"
    return written if any(c in written for c in ".e") else f"{written}.0"


BUG = Bug(
    id="lr-high",
    title="Learning rate a hundred times too high",
    difficulty="easy",
    observe=("The loss jumps far above where it started within the first epoch and ends no better than guessing, "
             "or turns into nan a few steps after the gradients start growing."),
    hints=(
        "Print the loss and the gradient norm at every step of the first epoch. Where does the climb begin?",
        "The first steps are fine and then each update makes the next loss worse. What sets the size of an update?",
        "Every update overshoots: the step size the optimizer was given is far beyond what this model tolerates.",
    ),
    why=("Each update moves the weights by about the learning rate times the gradient's direction (Adam normalises "
         "the gradient, so the step is about the learning rate itself). Past the edge of stability an update "
         "overshoots the minimum it aims at, the next gradient is larger, and the overshoot grows: the logits blow "
         "up, the loss climbs far above ln(k), and with plain SGD the weights overflow to inf and NaN. The NaN is "
         "where it ends, not where it started: the gradient norm grew for several steps before."),
    fix=("Use a learning rate the model tolerates (find it with a short learning-rate range test: the largest "
         "rate at which the loss still falls, divided by a few); a warm-up helps at the start but does not make a "
         "100× rate safe. Clipping bounds SGD's steps but not Adam's, and scaling the loss changes nothing for "
         "Adam."),
    probes=("divergence",),
    follow_up=(
        "The run turns NaN at step 50. Why is step 50 the wrong place to look, and what would you log instead?",
        "Why does gradient clipping not save an Adam run from a learning rate 100 times too large?",
        "How does a learning-rate range test work, and how do you read its curve?",
    ),
    operator=RaiseLearningRate(),
)
