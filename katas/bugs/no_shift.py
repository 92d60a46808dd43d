"""no-shift: a language model's targets are sliced like its inputs, not one token further on."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find


def plus_one(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``e`` when ``expr`` is ``e + 1`` or ``1 + e``."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        if isinstance(expr.right, cst.Integer) and expr.right.value == "1":
            return expr.left
        if isinstance(expr.left, cst.Integer) and expr.left.value == "1":
            return expr.right
    return None


def drop_one(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """``expr`` without one ``+ 1`` term (``i + 1 + T`` → ``i + T``, ``i + T + 1`` → ``i + T``), or None."""
    base = plus_one(expr)
    if base is not None:
        return base
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left = drop_one(expr.left)
        if left is not None:
            return expr.with_changes(left=left)
        right = drop_one(expr.right)
        if right is not None:
            return expr.with_changes(right=right)
    return None


def single_slice(sub: cst.Subscript) -> cst.Slice | None:
    if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Slice):
        return sub.slice[0].slice
    return None


COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp)


def is_int(expr: cst.BaseExpression | None, value: int) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return isinstance(expr.expression, cst.Integer) and -int(expr.expression.value) == value
    return isinstance(expr, cst.Integer) and int(expr.value) == value


def time_slice(sub: cst.Subscript, lower: int | None, upper: int | None) -> cst.SubscriptElement | None:
    """The element ``lower:upper`` of ``x[..., lower:upper]`` or ``x[:, lower:upper]`` (the sequence axis, second
    or after an ellipsis), a trailing ``:`` allowed; None when ``sub`` is not shaped so."""
    elements = list(sub.slice)
    if len(elements) == 3 and isinstance(elements[2].slice, cst.Slice) and elements[2].slice.lower is None \
            and elements[2].slice.upper is None:
        elements = elements[:2]
    if len(elements) != 2:
        return None
    head, part = elements[0].slice, elements[1].slice
    whole = isinstance(head, cst.Slice) and head.lower is None and head.upper is None and head.step is None
    ellipsis = isinstance(head, cst.Index) and isinstance(head.value, cst.Ellipsis)
    if not (whole or ellipsis) or not isinstance(part, cst.Slice) or part.step is not None:
        return None
    matches = (part.lower is None if lower is None else is_int(part.lower, lower)) and \
        (part.upper is None if upper is None else is_int(part.upper, upper))
    return elements[1] if matches else None


class UnshiftTargets(Operator):
    """Where a function slices a sequence twice, ``data[i:i + T]`` and ``data[i + 1:i + 1 + T]``, give the second
    slice the first one's bounds; where it shifts inside the loss, ``logits[..., :-1, :]`` against
    ``labels[..., 1:]``, cut the labels like the logits (``labels[..., :-1]``): the targets become the inputs."""

    no_site = ("it does not slice inputs and targets shifted by one from the same sequence (data[i:j], "
               "data[i + 1:j + 1]), nor shift labels against logits in its loss (labels[..., 1:], logits[..., :-1, :])")

    def same_start(self, ctx: Context, a: cst.BaseExpression, a_node: cst.CSTNode, b: cst.BaseExpression,
                   b_node: cst.CSTNode) -> bool:
        """Equal start indices: the same code, or each the variable of a comprehension over the same iterable."""
        if ctx.code(a) == ctx.code(b):
            return True
        if not (isinstance(a, cst.Name) and isinstance(b, cst.Name)):
            return False
        loops = [ctx.enclosing(n, COMPREHENSIONS) for n in (a_node, b_node)]
        return all(loop is not None and isinstance(loop.for_in.target, cst.Name) for loop in loops) \
            and loops[0].for_in.target.value == a.value and loops[1].for_in.target.value == b.value \
            and ctx.code(loops[0].for_in.iter) == ctx.code(loops[1].for_in.iter)

    def shifted(self, ctx: Context):
        """The slices ``seq[e + 1:... + 1 ...]`` that another slice of ``seq`` in the same function starts at ``e``."""
        for sub in ctx.all(cst.Subscript):
            part = single_slice(sub)
            start = plus_one(part.lower) if part is not None else None
            if start is None or drop_one(part.upper) is None:
                continue
            scope = ctx.enclosing(sub, cst.FunctionDef) or ctx.module
            for other in find(scope, cst.Subscript):
                twin = single_slice(other)
                if other is sub or twin is None or twin.lower is None or twin.upper is None:
                    continue
                if ctx.code(other.value) == ctx.code(sub.value) and self.same_start(ctx, start, sub, twin.lower, other):
                    yield sub
                    break

    def shifted_in_loss(self, ctx: Context):
        """``labels[..., 1:]`` where the same function also cuts another tensor's last position
        (``logits[..., :-1, :]``): the shift done where the loss is computed (the Hugging Face causal-LM shape)."""
        for sub in ctx.all(cst.Subscript):
            if time_slice(sub, 1, None) is None:
                continue
            scope = ctx.enclosing(sub, cst.FunctionDef) or ctx.module
            if any(other is not sub and time_slice(other, None, -1) is not None
                   and ctx.code(other.value) != ctx.code(sub.value) for other in find(scope, cst.Subscript)):
                yield sub

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"no-shift:{ctx.where(sub)}:{ctx.code(sub)}", sub)
                for sub in [*self.shifted(ctx), *self.shifted_in_loss(ctx)]]

    def mutate(self, ctx: Context, site: Site):
        if time_slice(site.node, 1, None) is not None:  # labels[..., 1:] -> labels[..., :-1]: each position's own token
            element = time_slice(site.node, 1, None)
            cut = cst.Slice(lower=None, upper=cst.UnaryOperation(cst.Minus(), cst.Integer("1")))
            return rewrite(ctx.module, {element: lambda e: e.with_changes(slice=cut)})

        def unshift(updated: cst.Subscript) -> cst.Subscript:
            part = single_slice(updated)
            element = updated.slice[0].with_changes(
                slice=part.with_changes(lower=plus_one(part.lower), upper=drop_one(part.upper)))
            return updated.with_changes(slice=[element])

        return rewrite(ctx.module, {site.node: unshift})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
def get_batch(data, ix):
    x = torch.stack([data[i:i + T] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
    return x, y
""",
            after="""\
def get_batch(data, ix):
    x = torch.stack([data[i:i + T] for i in ix])
    y = torch.stack([data[i:i + T] for i in ix])
    return x, y
"""), Example(
            before="""\
def lm_loss(logits, input_ids):
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = input_ids[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
""",
            after="""\
def lm_loss(logits, input_ids):
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = input_ids[..., :-1].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
""")]


BUG = Bug(
    id="no-shift",
    title="Targets not shifted by one",
    difficulty="easy",
    observe=("The language model's training loss drops to almost zero within a few dozen steps, and the "
             "validation loss follows it down; yet text generated from the model repeats one character forever."),
    hints=(
        "A near-zero loss on text the model cannot have memorised means the task is easier than it should be. "
        "What exactly is it asked to predict?",
        "Print one batch: the input characters and the target characters side by side, position by position.",
        "A language model predicts the token that comes after the ones it has read: its targets are its inputs "
        "moved along by one.",
    ),
    why=("With `y = data[i:i + T]` the target at each position is the token the model has just been given, so "
         "copying the input is a perfect answer: the loss collapses, and the model never learns what comes next. "
         "Generation, which feeds each prediction back in, then just repeats the last character."),
    fix="Slice the targets one token further on: `y = data[i + 1:i + 1 + T]` (or shift inside the loss: "
        "`logits[:, :-1]` against `tokens[:, 1:]`).",
    probes=("next-token",),
    follow_up=(
        "Where does a Hugging Face causal LM do this shift when you pass labels=input_ids?",
        "Why must the last input position have no target (or the slice read one token past the chunk)?",
        "Would a bidirectional encoder trained this way also reach zero loss? What would it learn?",
    ),
    operator=UnshiftTargets(),
)
