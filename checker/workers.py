"""Watching the random generators that DataLoader workers draw augmentation from.

For each DataLoader iteration the loader's ``worker_init_fn`` and ``collate_fn``
are wrapped (and restored once the workers have them). In every worker the
wrapper fingerprints each generator it can reach after the user's own
``worker_init_fn`` ran; the first time a batch changes a generator's state, the
starting fingerprint is appended to a file in the channel directory, with the
state after that batch. Two workers, or two epochs, that start a generator from
the same state and leave their first batch in the same state replay the same
augmentation stream (a dataset that reseeds its generator itself in its first
``__getitem__`` starts alike and leaves the batch apart). Loading in the main process is reported too: there a
dataset's own generator is simply followed from batch to batch.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import json
import os
import pickle
import random
import sys
import types
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import get_worker_info

REPORTS = "worker-rng.jsonl"
MAX_DEPTH = 10
MAX_OBJECTS = 4000
MAX_CONTAINER = 64
OPAQUE = (type, types.ModuleType, torch.Tensor, str, bytes, int, float, bool, type(None))


def fingerprint(generator: Any) -> str:
    """A short digest of a generator's state: equal digests, equal future draws."""
    if isinstance(generator, torch.Generator):
        raw = bytes(generator.get_state().tolist())
    elif hasattr(generator, "getstate"):  # random.Random or the random module
        raw = pickle.dumps(generator.getstate())
    elif hasattr(generator, "get_state"):  # numpy.random.RandomState or the numpy.random module
        raw = pickle.dumps(generator.get_state())
    else:  # numpy.random.Generator
        raw = pickle.dumps(generator.bit_generator.state)
    return hashlib.sha1(raw).hexdigest()[:16]


def is_generator(obj: Any) -> bool:
    if isinstance(obj, (torch.Generator, random.Random)):
        return True
    kind = type(obj)
    return kind.__module__.startswith("numpy.random") and kind.__name__ in ("Generator", "RandomState")


def members(obj: Any) -> list[tuple[str, Any]]:
    """What an object holds, by the path suffix that reaches it: attributes, items, closure cells."""
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"[{i}]", item) for i, item in enumerate(list(obj)[:MAX_CONTAINER])]
    if isinstance(obj, dict):
        return [(f"[{key!r}]", item) for key, item in list(obj.items())[:MAX_CONTAINER]]
    if isinstance(obj, types.FunctionType):
        cells = zip(obj.__code__.co_freevars, obj.__closure__ or ())
        return [(f"<{name}>", cell.cell_contents) for name, cell in cells if cell_filled(cell)]
    if isinstance(obj, types.MethodType):
        return [(".__self__", obj.__self__), (".__func__", obj.__func__)]
    if isinstance(obj, functools.partial):
        return [(".func", obj.func), (".args", obj.args), (".keywords", obj.keywords)]
    found = [(f".{name}", item) for name, item in vars(obj).items()] if hasattr(obj, "__dict__") else []
    for name in getattr(type(obj), "__slots__", ()):
        if isinstance(name, str) and hasattr(obj, name):
            found.append((f".{name}", getattr(obj, name)))
    return found


def cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def dataset_generators(dataset: Any) -> dict[str, Any]:
    """Generators the dataset can reach (attributes, containers, transforms, closures), by path."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    queue = collections.deque([(dataset, "dataset", 0)])
    while queue and len(seen) < MAX_OBJECTS:  # breadth first: the shortest path names a generator
        obj, path, depth = queue.popleft()
        if id(obj) in seen or isinstance(obj, OPAQUE):
            continue
        seen.add(id(obj))
        if is_generator(obj):
            found[path] = obj
        elif depth < MAX_DEPTH:
            queue += [(item, path + suffix, depth + 1) for suffix, item in members(obj)]
    return found


def worker_generators(dataset: Any) -> dict[str, Any]:
    """In a worker: the dataset's own generators and the process-wide ones."""
    found = dataset_generators(dataset)
    found["torch (global)"] = torch.default_generator
    found["random (global)"] = random
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found["numpy (global)"] = numpy.random
    return found


def report(channel_dir: str, **fields: Any) -> None:
    with open(os.path.join(channel_dir, REPORTS), "a") as f:
        f.write(json.dumps(fields) + "\n")


def read_reports(channel_dir: str) -> list[dict]:
    path = os.path.join(channel_dir, REPORTS)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class _Tracker:
    """Starting fingerprints in one process, reported on first use."""

    def __init__(self, generators: dict[str, Any], where: dict):
        self.generators, self.where = generators, where
        self.start = {name: fingerprint(g) for name, g in generators.items()}

    def check(self, channel_dir: str) -> None:
        for name in list(self.start):
            after = fingerprint(self.generators[name])
            if after != self.start[name]:
                report(channel_dir, generator=name, start=self.start.pop(name), after=after, **self.where)


_tracker: _Tracker | None = None  # one per worker process


@contextlib.contextmanager
def reporting_errors(channel_dir: str, where: dict) -> Iterator[None]:
    """The checker's own failure in a worker is reported, never raised into the user's loading."""
    global _tracker
    try:
        yield
    except Exception as exc:
        _tracker = None
        report(channel_dir, error=f"{type(exc).__name__}: {exc}", **where)


class WorkerInit:
    """Runs the user's ``worker_init_fn``, then fingerprints the worker's generators."""

    def __init__(self, user_fn: Callable | None, channel_dir: str, loader: int, pass_index: int):
        self.user_fn, self.channel_dir, self.loader, self.pass_index = user_fn, channel_dir, loader, pass_index

    def __call__(self, worker_id: int) -> None:
        global _tracker
        if self.user_fn is not None:
            self.user_fn(worker_id)
        info = get_worker_info()
        where = {"loader": self.loader, "pass": self.pass_index, "worker": worker_id, "workers": info.num_workers}
        with reporting_errors(self.channel_dir, where):
            _tracker = _Tracker(worker_generators(info.dataset), where)


class ObservedCollate:
    """Runs the user's ``collate_fn``; afterwards, reports generators this batch used first."""

    def __init__(self, user_fn: Callable, channel_dir: str):
        self.user_fn, self.channel_dir = user_fn, channel_dir

    def __call__(self, batch: Any) -> Any:
        out = self.user_fn(batch)
        if _tracker is not None:
            with reporting_errors(self.channel_dir, _tracker.where):
                _tracker.check(self.channel_dir)
        return out


@contextlib.contextmanager
def observed(loader: Any, channel_dir: str, key: int, pass_index: int) -> Iterator[None]:
    """While the loader starts its workers, hand them observing wrappers."""
    if loader.num_workers == 0:
        yield
        return
    init, collate = loader.worker_init_fn, loader.collate_fn
    loader.worker_init_fn = WorkerInit(init, channel_dir, key, pass_index)
    loader.collate_fn = ObservedCollate(collate, channel_dir)
    try:
        yield
    finally:
        loader.worker_init_fn, loader.collate_fn = init, collate


class MainProcessProbe:
    """For ``num_workers=0``: reports when fetching a batch draws from the dataset's own generator."""

    def __init__(self, loader: Any, channel_dir: str, key: int, pass_index: int):
        self.active = loader.num_workers == 0
        self.loader, self.channel_dir = loader, channel_dir
        self.where = {"loader": key, "pass": pass_index, "worker": "main", "workers": 0}
        self.tracker: _Tracker | None = None

    def before_fetch(self) -> None:
        if self.active and self.tracker is None:
            self.active = False  # stays off if fingerprinting fails
            with reporting_errors(self.channel_dir, self.where):
                self.tracker = _Tracker(dataset_generators(self.loader.dataset), self.where)
                self.active = True

    def after_fetch(self) -> None:
        if self.active and self.tracker is not None:
            self.active = False
            with reporting_errors(self.channel_dir, self.where):
                self.tracker.check(self.channel_dir)
                self.active = bool(self.tracker.start)
