"""view-transpose: ``h.transpose(0, 1)`` replaced by a reshape of the same shape, which mixes the samples."""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import method


def swaps_first_two(call: cst.Call) -> bool:
    values = [a.value for a in call.args]
    return (method(call) == "transpose" and len(values) == 2 and all(a.keyword is None for a in call.args)
            and all(isinstance(v, cst.Integer) for v in values) and {int(v.value) for v in values} == {0, 1})


class ViewForTranspose(Operator):
    """In a module class, at ``x.transpose(0, 1)`` (x a name or attribute), put
    ``x.view(x.shape[1], x.shape[0], *x.shape[2:])``: the shape a transpose would give, with the elements in
    their old order, so samples and time steps get mixed."""

    no_site = "it has no `x.transpose(0, 1)` inside a model"

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"view-transpose:{ctx.where(call)}:{ctx.code(call)}", call) for call in ctx.all(cst.Call)
                if swaps_first_two(call) and isinstance(call.func.value, (cst.Name, cst.Attribute))
                and (cls := ctx.enclosing(call, cst.ClassDef)) is not None and ctx.is_module_class(cls.name.value)]

    def mutate(self, ctx: Context, site: Site):
        value = ctx.module.code_for_node(site.node.func.value)
        view = cst.parse_expression(f"{value}.view({value}.shape[1], {value}.shape[0], *{value}.shape[2:])")
        return rewrite(ctx.module, {site.node: lambda call: view.with_changes(lpar=call.lpar, rpar=call.rpar)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch import nn


class Tagger(nn.Module):
    def forward(self, x):
        h = self.embed(x)
        out, _ = self.rnn(h.transpose(0, 1))
        return self.head(out)
""",
            after="""\
from torch import nn


class Tagger(nn.Module):
    def forward(self, x):
        h = self.embed(x)
        out, _ = self.rnn(h.view(h.shape[1], h.shape[0], *h.shape[2:]))
        return self.head(out)
""")]


BUG = Bug(
    id="view-transpose",
    title="Reshape instead of transpose mixes the batch",
    difficulty="hard",
    observe=("Everything runs, shapes all check out, and the loss falls, but far more slowly and to a worse "
             "accuracy than the model should reach; a sequence's prediction changes when the other sequences of "
             "its batch change, even in eval mode."),
    hints=(
        "In eval mode, change every sequence of a batch except the first. Should the first one's output move?",
        "Follow the tensor through every change of layout between batch-first and time-first: which one keeps "
        "the elements in memory order?",
        "A `view` to the swapped shape is not a swap of dimensions.",
    ),
    why=("`h.view(T, B, H)` of a `(B, T, H)` tensor gives the right shape but reads the elements in their old "
         "order: the new 'time step 0' holds the first B positions of sample 0, then the first positions of "
         "sample 1, and so on. The time-major layer then runs over sequences stitched from pieces of different "
         "samples. Nothing raises, because the shape is right."),
    fix=("Swap the dimensions with `h.transpose(0, 1)` (or `h.permute(1, 0, 2)`), and `.contiguous()` if a later "
         "`view` needs it; or build the recurrent layer with `batch_first=True`."),
    probes=("batch-independence",),
    follow_up=(
        "When does `view` raise and when does it silently succeed? What does `reshape` do instead?",
        "What does `.contiguous()` change in memory, and when is it needed after a transpose?",
        "How would you test any model for this class of bug in one line of autograd?",
    ),
    operator=ViewForTranspose(),
)
