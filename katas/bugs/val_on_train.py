"""val-on-train: the evaluation is handed the training loader instead of the validation loader.

Sites: in one function (or at module level), a call of a training function of the file (one that runs
``backward()``) and a call of an evaluation function of the file (one that runs a model and no backward pass), each
given a plain name that the function iterates over (``for x, y in loader``, ``enumerate(loader)``): the training
call's name is the training data, the evaluation call's the validation data, two different names. The edit hands
the evaluation call the training call's name: every figure the evaluation reports is measured on the training data.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.val_grad import evaluates
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import innermost_training_loops
from katas.engine.tree import find, method


def iterated(function: cst.FunctionDef) -> set[str]:
    """The parameters ``function`` loops over: ``for b in p``, or ``for b in enumerate(p)`` (``tqdm(p)``, ...), in a
    statement or a comprehension."""
    params = {p.name.value for p in function.params.params}
    found = set()
    for loop in find(function.body, cst.For, cst.CompFor):
        source = loop.iter
        if isinstance(source, cst.Call) and source.args and source.args[0].keyword is None:
            source = source.args[0].value
        if isinstance(source, cst.Name) and source.value in params:
            found.add(source.value)
    return found


def argument(ctx: Context, call: cst.Call, function: cst.FunctionDef, name: str) -> cst.Arg | None:
    """The argument of ``call`` bound to ``function``'s parameter ``name`` (positional or keyword; a method called
    on an instance, unless static, binds ``self`` first)."""
    params = [p.name.value for p in function.params.params]
    if isinstance(ctx.enclosing(function, (cst.FunctionDef, cst.ClassDef)), cst.ClassDef) \
            and isinstance(call.func, cst.Attribute) \
            and not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                        for d in function.decorators):
        params = params[1:]
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if (arg.keyword is None and i < len(params) and params[i] == name) or \
                (arg.keyword is not None and arg.keyword.value == name):
            return arg
    return None


def data_names(ctx: Context, call: cst.Call, kind) -> list[cst.Arg]:
    """The plain names ``call`` hands a function of the file of ``kind`` to iterate over."""
    found = []
    for function in ctx.callees(call):
        if kind(function):
            for name in sorted(iterated(function)):
                arg = argument(ctx, call, function, name)
                if arg is not None and isinstance(arg.value, cst.Name):
                    found.append(arg)
    return found


class EvaluateOnTrainingData(Operator):
    """Give an evaluation call the name its scope hands the training function as its data."""

    no_site = ("no scope calls both a training function and an evaluation function of the file, each with data it "
               "loops over")

    def pairs(self, ctx: Context) -> list[tuple[cst.Arg, cst.Arg]]:
        """(the training call's data argument, the evaluation call's), per scope."""
        inner = set(innermost_training_loops(ctx, through_calls=False))

        def trains(function: cst.FunctionDef) -> bool:
            return any(method(c) == "backward" for c in ctx.calls(function))

        def evaluation(function: cst.FunctionDef) -> bool:
            return not trains(function) and evaluates(ctx, function.body, inner)

        by_scope: dict[cst.CSTNode, tuple[list, list]] = {}
        for call in ctx.all(cst.Call):
            scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
            trained, evaluated = by_scope.setdefault(scope, ([], []))
            trained += data_names(ctx, call, trains)
            evaluated += data_names(ctx, call, evaluation)
        found = []
        for trained, evaluated in by_scope.values():
            if trained:
                found += [(trained[0], arg) for arg in evaluated
                          if arg.value.value not in {t.value.value for t in trained}]
        return found

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"val-on-train:{ctx.where(arg)}:{arg.value.value}", arg) for _, arg in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        train = next(train for train, arg in self.pairs(ctx) if arg is site.node)
        return rewrite(ctx.module, {site.node: lambda arg: arg.with_changes(value=train.value.deep_clone())})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
import torch


def train_one_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


for epoch in range(10):
    train_one_epoch(model, train_loader, optimizer)
    print(epoch, evaluate(model, val_loader))
""",
            after="""\
import torch


def train_one_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)


for epoch in range(10):
    train_one_epoch(model, train_loader, optimizer)
    print(epoch, evaluate(model, train_loader))
""")]


BUG = Bug(
    id="val-on-train",
    title="The evaluation reads the training loader",
    difficulty="medium",
    observe=("Nothing looks wrong: the loss falls, and the validation figures are as good as training's or better "
             "in every epoch."),
    hints=(
        "Which samples does the evaluation score? Count them, and compare the count with the validation set's size.",
        "Follow the loader the evaluation iterates back to where it was built.",
        "The evaluation is called with the training loader: every figure it prints is measured on data the model "
        "was trained on, and the validation set is never read.",
    ),
    why=("An evaluation is only a validation when it reads data the model never trained on. Called with the "
         "training loader, it measures how well the model fits its training data, in evaluation mode and after the "
         "epoch's updates, so its loss is usually below the running training loss: the figures look excellent, "
         "overfitting never shows, and early stopping or checkpoint selection follow a signal that cannot get worse. "
         "Nothing crashes, because both loaders yield batches of the same shape."),
    fix=("Hand the evaluation the validation loader. Keep the two loaders apart by construction (build them from one "
         "split, pass them by keyword, e.g. `evaluate(model, loader=val_loader)`), and check once that the number "
         "of samples evaluated is the validation set's size."),
    probes=("val-leak",),
    follow_up=(
        "Your validation loss is below your training loss from the first epoch on. What innocent causes are there, "
        "and how do you rule out this one?",
        "When is measuring accuracy on the training set useful, and how should it be labelled?",
        "How would a test keep a training loop from ever evaluating on its training loader?",
    ),
    operator=EvaluateOnTrainingData(),
)
