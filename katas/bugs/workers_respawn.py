"""workers-respawn: a multi-worker DataLoader iterated every epoch loses ``persistent_workers=True``.

Sites: ``persistent_workers=True`` given to a ``DataLoader(...)`` whose ``num_workers`` is not written as 0, when
the loader is what a training loop iterates (``for x, y in loader``, ``enumerate(loader)`` ...) and that loop runs
repeatedly (inside an epoch loop, or in a function called from one). The edit drops the argument: the loader
starts its worker processes again at every epoch.
"""
from __future__ import annotations

import libcst as cst

from katas.bugs.ddp_set_epoch import keyword
from katas.bugs.no_shuffle import is_true, iterated_by, training_loops
from katas.bugs.worker_seed import without_arg
from katas.catalogue import Bug
from katas.engine.context import LOADER, Context
from katas.engine.operator import Example, Operator, Site, rewrite
from katas.engine.patterns import runs_repeatedly


class DropPersistentWorkers(Operator):
    """Drop ``persistent_workers=True`` from a multi-worker loader that training iterates epoch after epoch."""

    no_site = "no DataLoader with worker processes and persistent_workers=True is iterated by a repeated training loop"

    def sites(self, ctx: Context) -> list[Site]:
        loops = [loop for loop in training_loops(ctx) if runs_repeatedly(ctx, loop)]
        found = []
        for call in ctx.all(cst.Call):
            persistent, workers = keyword(call, "persistent_workers"), keyword(call, "num_workers")
            if ctx.constructed(call) != LOADER or persistent is None or not is_true(persistent.value) \
                    or workers is None or (isinstance(workers.value, cst.Integer) and workers.value.value == "0"):
                continue
            if iterated_by(ctx, call, loops):
                data = next((ctx.code(a.value) for a in call.args if a.keyword is None and not a.star), "")
                found.append(Site(f"workers-respawn:{ctx.where(call)}:DataLoader({data})", call))
        return found

    def mutate(self, ctx: Context, site: Site):
        call = site.node
        index = next(i for i, a in enumerate(call.args) if a.keyword is not None
                     and a.keyword.value == "persistent_workers")
        return rewrite(ctx.module, {call: lambda c: without_arg(c, index)})

    def examples(self) -> list[Example]:
        return [Example(
            before="""\
from torch.utils.data import DataLoader

loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=8, persistent_workers=True)
for epoch in range(90):
    for images, labels in loader:
        loss = criterion(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
            after="""\
from torch.utils.data import DataLoader

loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=8)
for epoch in range(90):
    for images, labels in loader:
        loss = criterion(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""")]


BUG = Bug(
    id="workers-respawn",
    title="DataLoader workers restarted every epoch",
    difficulty="medium",
    observe=("The results are exactly right, but every epoch begins with a pause: the first batch of each epoch "
             "takes many times longer to arrive than the batches after it, and the processes serving the data "
             "change their ids from one epoch to the next."),
    hints=(
        "Time how long each epoch waits for its first batch, and compare with the second batch.",
        "Print `os.getpid()` from the dataset's `__getitem__`: which processes serve epoch 1, and which serve "
        "epoch 2?",
        "The DataLoader starts its worker processes anew at every iteration: each epoch pays their start-up "
        "again.",
    ),
    why=("Iterating a DataLoader with `num_workers > 0` creates an iterator that forks (or spawns) its workers, "
         "hands each a copy of the dataset and waits for their first batches; when the iteration ends the workers "
         "are shut down. Epoch after epoch that start-up is paid again: small with fork and a tiny dataset, "
         "seconds per epoch with spawn (Windows, macOS, CUDA in the workers) or a dataset that is expensive to "
         "copy, and on short epochs a large share of the run."),
    fix=("Build the loader with `persistent_workers=True` (it needs `num_workers > 0`): the first iteration starts "
         "the workers and later ones reuse them. On a dataset this small, loading in the main process "
         "(`num_workers=0`) also avoids the start-up."),
    probes=("workers-respawn",),
    follow_up=(
        "What does `persistent_workers=True` keep between epochs, and what must a Dataset then not assume about "
        "its per-epoch state?",
        "How do `prefetch_factor` and `pin_memory` change what the workers do?",
        "Why does the start method (fork, spawn, forkserver) change the start-up cost so much?",
    ),
    operator=DropPersistentWorkers(),
)
