"""no-shuffle: the training DataLoader stops shuffling, so every epoch visits the data in one fixed order."""
from __future__ import annotations

import libcst as cst

from katas.bugs.softmax_ce import callees
from katas.catalogue import Bug
from katas.engine.context import LOADER, LOOPS, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.tree import find, walk

DEPTH = 2  # calls into the file's own functions followed to find the backward() a loop's body runs


class StopShuffling(Operator):
    """Turn ``shuffle=True`` into ``shuffle=False`` on a DataLoader that a training loop iterates: given as a
    keyword, as the third positional argument, or as ``'shuffle': True`` in a dict of keyword arguments passed
    with ``**``. The loader is followed
    from where it is built through assignments, ``self`` attributes and calls into the file's own functions and
    classes to a loop over it whose body runs ``backward()``; when that finds none, every shuffled loader is a site,
    marked as a guess."""

    no_site = "it has no DataLoader built with shuffle=True"

    def sites(self, ctx: Context) -> list[Site]:
        found = shuffled_loaders(ctx)
        loops = training_loops(ctx)
        trained = [(call, flag) for call, flag in found if iterated_by(ctx, call, loops)]
        return [Site(f"no-shuffle:{ctx.where(call)}:{label(ctx, call, flag)}", flag, guessed=not trained)
                for call, flag in trained or found]

    def mutate(self, ctx: Context, site: Site) -> cst.Module:
        return rewrite(ctx.module, {site.node: lambda node: node.with_changes(value="False")})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import DataLoader

train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
val_loader = DataLoader(val_set, batch_size=256, shuffle=True)
for epoch in range(10):
    for x, y in train_loader:
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
""",
            after="""\
from torch.utils.data import DataLoader

train_loader = DataLoader(train_set, batch_size=64, shuffle=False)
val_loader = DataLoader(val_set, batch_size=256, shuffle=True)
for epoch in range(10):
    for x, y in train_loader:
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
"""), Example(
            before="""\
import torch

train_kwargs = {"batch_size": 64, "shuffle": True}
loader = torch.utils.data.DataLoader(data, **train_kwargs)
for x, y in loader:
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""",
            after="""\
import torch

train_kwargs = {"batch_size": 64, "shuffle": False}
loader = torch.utils.data.DataLoader(data, **train_kwargs)
for x, y in loader:
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""")]


def is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def shuffled_loaders(ctx: Context) -> list[tuple[cst.Call, cst.Name]]:
    """(DataLoader call, the ``True`` that makes it shuffle): ``shuffle=True``, or ``**kwargs`` naming a dict literal
    (``{"shuffle": True}``, ``dict(shuffle=True)``) assigned in the file."""
    dicts: dict = {}
    for assign in ctx.all(cst.Assign):
        flag = shuffle_entry(assign.value)
        if flag is not None:
            for target in assign.targets:
                key = ctx.binding(target.target)
                if key is not None:
                    dicts.setdefault(key, flag)
    found = []
    for call in ctx.all(cst.Call):
        if ctx.constructed(call) != LOADER:
            continue
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) >= 3 and is_true(positional[2].value):  # DataLoader(dataset, batch_size, shuffle)
            found.append((call, positional[2].value))
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "shuffle" and is_true(arg.value):
                found.append((call, arg.value))
            elif arg.star == "**" and (key := ctx.binding(arg.value)) is not None and key in dicts:
                found.append((call, dicts[key]))
    return found


def shuffle_entry(value: cst.BaseExpression) -> cst.Name | None:
    """The ``True`` of ``"shuffle": True`` in a dict literal, or of ``shuffle=True`` in ``dict(...)``."""
    if isinstance(value, cst.Dict):
        return next((e.value for e in value.elements if isinstance(e, cst.DictElement)
                     and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == "shuffle"
                     and is_true(e.value)), None)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "shuffle"
                     and is_true(a.value)), None)
    return None


def label(ctx: Context, call: cst.Call, flag: cst.Name) -> str:
    """``DataLoader(train_set)``: the loader by its dataset argument (and the ``**kwargs`` that shuffle it)."""
    data = next((ctx.code(a.value) for a in call.args if a.keyword is None and not a.star), "")
    direct = any(a.value is flag for a in call.args)
    splat = "" if direct else next((f", **{ctx.code(a.value)}" for a in call.args if a.star == "**"), "")
    return f"DataLoader({data}{splat})"


def training_loops(ctx: Context) -> list[cst.For]:
    """``for`` loops whose body runs ``backward()``: directly, or in a function of the file it calls."""
    def trains(root: cst.CSTNode, depth: int) -> bool:
        if ctx.calls(root, "backward"):
            return True
        return depth < DEPTH and any(trains(callee.body, depth + 1) for call in ctx.calls(root)
                                     for callee, _ in callees(ctx, call))

    return [loop for loop in ctx.all(cst.For) if trains(loop.body, 0)]


def reads(ctx: Context, expr: cst.CSTNode) -> set:
    """The names and ``self`` attributes ``expr`` reads, as binding keys (an attribute's own name is not a read)."""
    found = set()
    for n in find(expr, cst.Name, cst.Attribute):
        if isinstance(n, cst.Name) and not ctx.is_read(n):
            continue
        key = ctx.binding(n)
        if key is not None:
            found.add(key)
    return found


def targets(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The names and attributes an assignment target writes: each element of a tuple."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [t for e in node.elements for t in targets(e.value)]
    return [node]


def iterated_by(ctx: Context, call: cst.Call, loops: list[cst.For]) -> bool:
    """Whether the loader ``call`` builds is what one of ``loops`` iterates (``for b in loader``,
    ``enumerate(loader)``, ``tqdm(loader)`` ...), or what a ``while`` loop that runs ``backward()`` draws from
    with ``next``."""
    keys = holders(ctx, call)
    if any(reads(ctx, loop.iter) & keys for loop in loops):
        return True
    for loop in ctx.all(*LOOPS):
        draws = [c for c in find(loop.body, cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "next"]
        if ctx.calls(loop.body, "backward") and any(reads(ctx, c) & keys for c in draws):
            return True
    return False


def holders(ctx: Context, call: cst.Call) -> set:
    """Names and ``self`` attributes that hold the loader built by ``call`` (or an iterator over it): through
    assignments whose value builds or reads one, and from arguments to the parameters of the file's own functions."""
    keys: set = set()
    calls = [(c, callee, offset) for c in ctx.all(cst.Call) for callee, offset in callees(ctx, c)]
    for _ in range(10):
        before = set(keys)
        for assign in ctx.all(cst.Assign):
            if call in set(walk(assign.value)) or reads(ctx, assign.value) & keys:
                keys |= {k for t in assign.targets for n in targets(t.target) if (k := ctx.binding(n)) is not None}
        for c, callee, offset in calls:
            params = callee.params
            positional = [*params.posonly_params, *params.params][offset:]
            for i, arg in enumerate(c.args):
                if arg.value is not call and not (isinstance(arg.value, (cst.Name, cst.Attribute))
                                                   and ctx.binding(arg.value) in keys):
                    continue
                if arg.keyword is not None:
                    param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == arg.keyword.value),
                                 None)
                else:
                    param = positional[i] if i < len(positional) and not arg.star else None
                if param is not None and (key := ctx.binding(param.name)) is not None:
                    keys.add(key)
        if keys == before:
            break
    return keys


BUG = Bug(
    id="no-shuffle",
    title="The training data come in the same order every epoch",
    difficulty="hard",
    observe=("Training runs and the model learns. Plot the loss batch by batch: each epoch traces the same jagged "
             "pattern as the one before it, spike for spike, as if the epochs were copies of one another."),
    hints=(
        "Print the first few indices of the first batch in two different epochs. Are they the same?",
        "Who decides the order in which the DataLoader visits the training set, and is that order ever redrawn?",
        "Look at how the training DataLoader is built: what does it do with the order of the dataset?",
    ),
    why=("With `shuffle=False` a DataLoader reads its dataset with a SequentialSampler: indices 0, 1, 2, ... in "
         "every epoch. Every epoch then sees the same batches in the same sequence, so the noise in the gradient "
         "repeats instead of averaging out, consecutive steps see correlated items, and any order the data were "
         "stored in (sorted by class, by source, by date) biases each epoch the same way."),
    fix=("Shuffle the training loader: `DataLoader(train_set, shuffle=True)` (a RandomSampler draws a new "
         "permutation at every epoch), or pass a sampler that draws a new order each epoch (a RandomSampler with "
         "its own generator, a DistributedSampler with `set_epoch(epoch)`). Keep validation unshuffled. A "
         "permutation drawn once before training is still one fixed order."),
    probes=("epoch-order",),
    follow_up=(
        "Why is shuffling the validation set pointless?",
        "What does DistributedSampler.set_epoch do, and what happens if you forget it?",
        "When would you deliberately not shuffle a training set (think of stateful recurrent models or curricula)?",
        "How do you make a shuffled run reproducible?",
    ),
    operator=StopShuffling(),
)
