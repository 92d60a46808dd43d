"""val-on-train: the evaluation is handed the training data instead of the validation data.

Two kinds of site, each pairing the data a training step reads with the data an evaluation reads, two different
plain names; the edit gives the evaluation the training name: every figure it reports is measured on the training
data.

* Calls: in one function (or at module level), a call of a training function of the file (one that runs
  ``backward()``) and a call of an evaluation function of the file (one that runs a model and no backward pass),
  each given a name that the function loops over (``for x, y in loader``, ``enumerate(loader)``, ``tqdm(loader)``).
  The evaluation call's argument becomes the training call's.
* Loops: a loop of an evaluation over a name (``for x, y in test_loader``, in a block that runs a model and no
  backward pass) and a training loop over another name (its body reaches ``backward()``), both in one function, or
  both over module-level names (a ``train()`` and a ``test()`` reading the script's global loaders). The
  evaluation loop's name becomes the training loop's.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.val_grad import evaluates
from katas.catalogue import Bug
from katas.engine.context import Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import bound_arguments, innermost_training_loops, loader_of
from katas.engine.tree import find, method


def looped_name(ctx: Context, loop: cst.For | cst.CompFor) -> cst.Name | None:
    """The name a loop iterates: ``for b in data``, ``for i, b in enumerate(data)``, ``tqdm(data)``."""
    source = loader_of(ctx, loop.iter)
    return source if isinstance(source, cst.Name) else None


def iterated(ctx: Context, function: cst.FunctionDef) -> set[str]:
    """The parameters ``function`` loops over, in a statement or a comprehension."""
    params = {p.name.value for p in function.params.params}
    return {name.value for loop in find(function.body, cst.For, cst.CompFor)
            if (name := looped_name(ctx, loop)) is not None and name.value in params}


def local_names(function: cst.FunctionDef) -> set[str]:
    """The names ``function`` binds: its parameters, and the targets of its assignments and loops."""
    found = {p.name.value for p in function.params.params}
    for node in find(function.body, cst.AssignTarget, cst.For, cst.AnnAssign):
        target = node.target
        found |= {n.value for n in find(target, cst.Name)} if not isinstance(target, cst.Attribute) else set()
    return found


def argument(ctx: Context, call: cst.Call, function: cst.FunctionDef, name: str) -> cst.Arg | None:
    """The argument of ``call`` bound to ``function``'s parameter ``name`` (a method called on an instance, unless
    static, binds ``self`` first); none behind a starred argument, whose place is not known."""
    bound_self = isinstance(ctx.enclosing(function, (cst.FunctionDef, cst.ClassDef)), cst.ClassDef) \
        and isinstance(call.func, cst.Attribute) \
        and not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                    for d in function.decorators)
    if any(arg.star for arg in call.args):
        return None
    return next((arg for param, arg in bound_arguments(call, function, int(bound_self)) if param.name.value == name),
                None)


def data_names(ctx: Context, call: cst.Call, kind) -> list[cst.Arg]:
    """The plain names ``call`` hands a function of the file of ``kind`` to iterate over."""
    found = []
    for function in ctx.callees(call):
        if kind(function):
            for name in sorted(iterated(ctx, function)):
                arg = argument(ctx, call, function, name)
                if arg is not None and isinstance(arg.value, cst.Name):
                    found.append(arg)
    return found


class EvaluateOnTrainingData(Operator):
    """Give an evaluation the name its training reads as data."""

    no_site = ("no evaluation of the file reads other data than its training does (a call of an evaluation function, "
               "or a loop, beside the training's)")

    def pairs(self, ctx: Context) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
        """(the training's data node, the evaluation's): call arguments, then loop names."""
        inner = set(innermost_training_loops(ctx, through_calls=False))

        def trains(node: cst.CSTNode) -> bool:
            return any(method(c) == "backward" for c in ctx.calls(node))

        def evaluation(node: cst.CSTNode) -> bool:
            body = node.body if isinstance(node, cst.FunctionDef) else node
            return not trains(node) and evaluates(ctx, body, inner)

        by_scope: dict[cst.CSTNode, tuple[list, list]] = {}
        for call in ctx.all(cst.Call):
            scope = ctx.enclosing(call, cst.FunctionDef) or ctx.module
            trained, evaluated = by_scope.setdefault(scope, ([], []))
            trained += data_names(ctx, call, trains)
            evaluated += data_names(ctx, call, evaluation)
        found = []
        for trained, evaluated in by_scope.values():
            if trained:
                found += [(trained[0].value, arg.value) for arg in evaluated
                          if arg.value.value not in {t.value.value for t in trained}]
        return found + self.loop_pairs(ctx, trains, evaluation)

    def loop_pairs(self, ctx: Context, trains, evaluation) -> list[tuple[cst.Name, cst.Name]]:
        training, evaluating = [], []
        for loop in ctx.all(cst.For):
            name = looped_name(ctx, loop)
            if name is not None:
                (training if trains(loop) else evaluating if evaluation(loop) else []).append((loop, name))

        def scope(loop: cst.For, name: cst.Name) -> cst.CSTNode | None:
            """The function whose name it reads, or the module for a global name (None: neither is known)."""
            function = ctx.enclosing(loop, cst.FunctionDef)
            if function is None or name.value in local_names(function):
                return function or ctx.module
            return ctx.module if all(f.name.value != name.value for f in ctx.all(cst.FunctionDef)) else None

        found = []
        for loop, name in evaluating:
            where = scope(loop, name)
            match = next((t for l, t in training if t.value != name.value and scope(l, t) is where is not None), None)
            if match is not None:
                found.append((match, name))
        return found

    def sites(self, ctx: Context) -> list[Site]:
        return [Site(f"val-on-train:{ctx.where(node)}:{node.value}", node) for _, node in self.pairs(ctx)]

    def mutate(self, ctx: Context, site: Site):
        train = next(train for train, node in self.pairs(ctx) if node is site.node)
        return rewrite(ctx.module, {site.node: lambda node: train.deep_clone()})

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
