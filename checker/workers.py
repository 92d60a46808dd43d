"""Watching the random generators that DataLoader workers draw augmentation from.

For each DataLoader iteration the loader's ``worker_init_fn`` and ``collate_fn``
are wrapped (and restored once the workers have them). In every worker the
wrapper fingerprints each generator it can reach after the user's own
``worker_init_fn`` ran; the first time a batch changes a generator's state, the
starting fingerprint is appended to a file in the channel directory. Two
workers, or two epochs, that start a generator from the same state replay the
same augmentation stream. Loading in the main process is reported too: there a
dataset's own generator is simply followed from batch to batch.
"""
from __future__ import annotations

import contextlib
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
MAX_DEPTH = 3
MAX_CONTAINER = 16
OPAQUE = (type, types.FunctionType, types.MethodType, types.ModuleType, torch.Tensor, torch.nn.Module)


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


def dataset_generators(dataset: Any) -> dict[str, Any]:
    """Generators reachable from the dataset's attributes, by attribute path."""
    found: dict[str, Any] = {}
    seen: set[int] = set()

    def walk(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > MAX_DEPTH:
            return
        seen.add(id(obj))
        if is_generator(obj):
            found[path] = obj
            return
        if isinstance(obj, (list, tuple)) and len(obj) <= MAX_CONTAINER:
            for i, item in enumerate(obj):
                walk(item, f"{path}[{i}]", depth + 1)
        elif isinstance(obj, dict) and len(obj) <= MAX_CONTAINER:
            for key, item in obj.items():
                walk(item, f"{path}[{key!r}]", depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, OPAQUE):
            for name, item in vars(obj).items():
                walk(item, f"{path}.{name}", depth + 1)

    walk(dataset, "dataset", 0)
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
            if fingerprint(self.generators[name]) != self.start[name]:
                report(channel_dir, generator=name, start=self.start.pop(name), **self.where)


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
