"""Processes a checked script starts itself, each observed as a rank that writes ``rank-I`` of the channel.

:func:`observe_spawned` wraps ``torch.multiprocessing.spawn`` / ``start_processes`` and
``multiprocessing.Process.start`` in the checked process; what a started process runs is an
:class:`ObservedChild`, which installs the observers there (in a forked child, after putting away the parent's)
through :func:`checker.harness.observe`.
"""
from __future__ import annotations

import os
import sys
import time

from checker import harness
from checker.distributed import FORKED, SPAWNED, rank_dir


def observe_spawned(device: str, channel: str, key: str, patches) -> None:
    """Observe the processes the script starts itself, each as one rank writing ``rank-I`` of the channel:

    * with ``torch.multiprocessing.spawn`` / ``start_processes`` (any start method), rank I being torch's process
      index;
    * with ``multiprocessing.Process`` (and ``torch.multiprocessing.Process``) running a function of the script's
      own (Hogwild's workers), numbered in the order they start. DataLoader workers, pool workers and what torch
      or the checker start for themselves are not ranks.

    A forked child carries this process's observers mid-run: it puts them away before it observes itself. A
    process subclass with its own ``run()``, started in a fresh interpreter (spawn, forkserver), is not observed;
    the channel says such processes were started."""
    import multiprocessing.process

    import torch.multiprocessing

    spawning = sys.modules["torch.multiprocessing.spawn"]  # the module: the package's `spawn` is its function
    original_start_processes = spawning.start_processes

    def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        return original_start_processes(SpawnedRank(fn, device, channel, key), args, nprocs, join, daemon, start_method)

    patches.patch(spawning, "start_processes", start_processes)
    patches.patch(torch.multiprocessing, "start_processes", start_processes)

    base = multiprocessing.process.BaseProcess
    original_start, started = base.start, [0]

    def start(process) -> None:
        target = getattr(process, "_target", None)
        if target is not None and not isinstance(target, (SpawnedRank, ObservedProcess)) and own_code(target):
            process._target = ObservedProcess(target, started[0], device, channel, key)
            started[0] += 1
        elif target is None and type(process).run is not base.run and own_code(type(process).run):
            if _method(process) == "fork":
                process.run = ObservedProcess(process.run, started[0], device, channel, key)
                started[0] += 1
            else:
                with open(os.path.join(channel, FORKED), "w"):
                    pass
        return original_start(process)

    patches.patch(base, "start", start)


def own_code(function) -> bool:
    """Whether ``function`` is the script's (not torch's, the checker's or Python's own workers)."""
    module = (getattr(function, "__module__", None) or "").split(".")[0]
    return module not in ("torch", "checker", "multiprocessing", "concurrent", "threading")


def _method(process) -> str:
    context = getattr(process, "_ctx", None) or getattr(process, "_start_method", None)
    if isinstance(context, str):
        return context
    try:
        import multiprocessing

        return (context.get_start_method() if context is not None else multiprocessing.get_start_method())
    except (AttributeError, ValueError):
        return "fork"


class ObservedChild:
    """What a process the script starts runs, observed in that process: it installs the observers there (in a
    forked child, after putting away the parent's), calls what the script asked for, writes its record to
    ``rank-I``, and ends as it would have (its exception, if any, goes on)."""

    def __init__(self, fn, device: str, channel: str, key: str):
        self.fn, self.device, self.channel, self.key = fn, device, channel, key

    def observe(self, index: int, call) -> None:
        harness.leave_inherited()
        os.environ[SPAWNED] = str(index)
        os.environ["KATA_DEVICE"] = self.device
        own = rank_dir(self.channel, index)
        os.makedirs(own, exist_ok=True)
        raised: list[BaseException] = []

        def run() -> dict:
            try:
                call()
                outcome = {"status": "finished", "code": 0}
            except SystemExit as exc:
                raised.append(exc)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                outcome = {"status": "finished" if code == 0 else "exit", "code": code, "exit_called": True}
            except BaseException as exc:  # noqa: BLE001 - recorded, then raised again below
                raised.append(exc)
                source = getattr(getattr(self.fn, "__code__", None), "co_filename", "")
                outcome = {"status": "exception", "error": f"{type(exc).__name__}: {exc}",
                           "traceback": harness.script_traceback(exc, source)}
            outcome["ended_at"] = time.time()
            return outcome

        harness.observe(run, self.device, own, self.key)
        if raised:
            raise raised[0]


class SpawnedRank(ObservedChild):
    """A process function the checked script hands to ``torch.multiprocessing.spawn``: rank I is its index."""

    def __call__(self, index: int, *args) -> None:
        self.observe(index, lambda: self.fn(index, *args))


class ObservedProcess(ObservedChild):
    """The target (or ``run``) of a ``multiprocessing.Process`` the script starts: rank I in start order."""

    def __init__(self, fn, index: int, device: str, channel: str, key: str):
        super().__init__(fn, device, channel, key)
        self.index = index

    def __call__(self, *args, **kwargs) -> None:
        self.observe(self.index, lambda: self.fn(*args, **kwargs))
