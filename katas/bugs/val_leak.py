"""val-leak: the validation set is drawn from the training data.

The site is found by structure: a function of the file that makes a data set (it returns a pair, ``return x, y``, or
a ``TensorDataset``) and is called more than once in one scope with other arguments, the first call making the
training set and a later one the validation set (``make_data(1024, seed=1)``, then ``make_data(500, seed=2)``). The
later call is given the first call's arguments: the validation set is drawn from the same seed and size as the
training set, so every validation sample is a training sample. The arguments must be literals or plain names, so
that the copy means the same thing where it lands.
"""
from __future__ import annotations

import libcst as cst

from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import TENSOR_DATASET, data_pair
from katas.engine.tree import find

PLAIN = (cst.Integer, cst.Float, cst.SimpleString, cst.Name)


class DrawValidationFromTraining(Operator):
    """Give the call that makes the validation set the arguments of the call that made the training set."""

    no_site = "no data-making function of the file is called twice in one scope (training, then validation data)"

    def makes_data(self, ctx: Context, function: cst.FunctionDef) -> bool:
        """Whether ``function`` returns a data set: a pair (``x, y``) or a ``TensorDataset``."""
        for ret in find(function.body, cst.Return):
            if ctx.enclosing(ret, cst.FunctionDef) is not function:
                continue
            if data_pair(ctx, ret.value) is not None \
                    or (isinstance(ret.value, cst.Call) and ctx.is_call_to(ret.value, TENSOR_DATASET)):
                return True
        return False

    def plain(self, call: cst.Call) -> bool:
        """Whether every argument is a literal or a plain name (``1024``, ``seed=1``, ``n_train``)."""
        return bool(call.args) and all(not arg.star and isinstance(arg.value, PLAIN) for arg in call.args)

    def pairs(self, ctx: Context) -> list[tuple[cst.Call, cst.Call]]:
        """(the first call, a later call with other arguments) of each data function, per scope."""
        found = []
        for function in ctx.all(cst.FunctionDef):
            if ctx.enclosing(function, (cst.FunctionDef, cst.ClassDef)) is not None or not self.makes_data(ctx, function):
                continue
            by_scope: dict[cst.CSTNode, list[cst.Call]] = {}
            for call in ctx.callers(function):
                if isinstance(call.func, cst.Name) and call.func.value == function.name.value and self.plain(call):
                    by_scope.setdefault(ctx.enclosing(call, cst.FunctionDef) or ctx.module, []).append(call)
            for calls in by_scope.values():
                first = calls[0]
                found += [(first, later) for later in calls[1:] if ctx.code(later) != ctx.code(first)]
        return found

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"val-leak:{ctx.where(later)}:{ctx.code(later)}", later) for _, later in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        first = next(first for first, later in self.pairs(ctx) if later is site.node)
        return rewrite(ctx.module, {site.node: lambda call: call.with_changes(args=first.args)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x.sum(1) > 0).long()


x, y = make_data(1024, seed=1)
val_x, val_y = make_data(256, seed=2)
""",
            after="""\
import torch


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x.sum(1) > 0).long()


x, y = make_data(1024, seed=1)
val_x, val_y = make_data(1024, seed=1)
"""), Example(
            before="""\
import torch
from torch.utils.data import TensorDataset


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return TensorDataset(x, x.argmax(1))


def main():
    train_set, val_set = make_data(1024, seed=1), make_data(512, seed=2)
""",
            after="""\
import torch
from torch.utils.data import TensorDataset


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    return TensorDataset(x, x.argmax(1))


def main():
    train_set, val_set = make_data(1024, seed=1), make_data(1024, seed=1)
""")]


BUG = Bug(
    id="val-leak",
    title="Validation samples drawn from the training data",
    difficulty="hard",
    observe=("Nothing looks wrong: the loss falls, and the validation figures are as good as training's or better "
             "from the first epoch on."),
    hints=(
        "Where do the validation samples come from, and where do the training samples come from?",
        "Could a validation sample also be a training sample? Compare the two sets item by item.",
        "The validation set is built with the training set's seed and size: every validation sample was trained on.",
    ),
    why=("Validation estimates how the model does on data it was not trained on. A validation sample that is also a "
         "training sample (two splits drawn with overlapping indices or the same seed, a split made after "
         "duplicating rows, a test set built from the training arrays) measures how well the model remembers it: "
         "the validation loss and accuracy come out optimistic, early stopping and model selection follow the "
         "wrong signal, and the gap to real data shows only in production."),
    fix=("Split once, into disjoint parts: draw validation data from another seed or source, or split one set with "
         "one permutation (``random_split`` with a fixed generator, disjoint index ranges). Check the split: no "
         "validation item may equal a training item (hash rows and intersect)."),
    probes=("val-leak",),
    follow_up=(
        "Your validation accuracy is higher than your training accuracy. What could cause that, innocent and not?",
        "How do duplicated rows in a raw table leak between splits even when the indices are disjoint?",
        "For time series or users, why is a random split of rows itself a leak?",
    ),
    operator=DrawValidationFromTraining(),
)
