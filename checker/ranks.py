"""One rank of a distributed run: ``python -m checker.ranks SCRIPT DEVICE CHANNEL_DIR``, started by the launcher.

``kata check --nproc N`` runs PyTorch's own launcher (``torch.distributed.run``),
which starts this module once per rank with ``RANK``, ``WORLD_SIZE`` and the
rendezvous in its environment, exactly as it would start the script. Each rank
observes the script as the single-process harness does and writes its own signed
record to ``CHANNEL_DIR/rank-R``. Its signing key waits there in a file the
``kata`` process wrote, read and deleted before torch (and so before the script)
is imported. While the rank waits in a collective called from Python, the name of
that collective is in ``rank-R/collective`` (for a report on a rank that hangs);
a rank the launcher stops (it does so when another rank fails) leaves
``rank-R/stopped``. Ranks a checked script starts itself with
``torch.multiprocessing.spawn`` are observed the same way (:class:`SpawnedRank`);
the warm checker forks ranks with the environment the launcher would give them
(:func:`launcher_environment`).
"""
from __future__ import annotations

import os
import signal
import sys
import time

KEY, STOPPED, COLLECTIVE, FORKED = "key", "stopped", "collective", "forked"
SPAWNED = "KATA_SPAWNED_RANK"  # set in a rank the checked script started itself
_exit = os._exit  # the real one: a checked script's ``os._exit`` writes its record first


def rank_dir(channel: str, rank: int) -> str:
    return os.path.join(channel, f"rank-{rank}")


def _stopped(channel_dir: str):
    def handler(signum: int, frame) -> None:
        try:
            with open(os.path.join(channel_dir, STOPPED), "w") as f:
                f.write(signal.Signals(signum).name)
        finally:
            _exit(128 + signum)

    return handler


def observe_rank(script: str, device: str, own: str, key: str) -> int:
    """Observe this rank's run of the script (torch and the observers already imported). Returns the exit status
    the rank would have had on its own (1 when the script raised), so that the launcher, as without the checker,
    stops the other ranks when one fails instead of leaving them waiting for it."""
    from checker import harness

    signal.signal(signal.SIGTERM, _stopped(own))
    outcome = harness.check(script, device, own, key)
    return {"exception": 1, "exit": outcome.get("code", 1)}.get(outcome["status"], 0)


def launcher_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """What ``torchrun --standalone --nproc-per-node WORLD`` puts in a worker's environment, for ranks forked
    without it (the warm checker), whose rendezvous store listens on ``port`` of the loopback."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_NAME": "default", "ROLE_WORLD_SIZE": str(world),
            "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "kata",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def main() -> None:
    script, device, channel = sys.argv[1:4]
    own = rank_dir(channel, int(os.environ["RANK"]))
    path = os.path.join(own, KEY)
    with open(path) as f:
        key = f.read().strip()
    os.unlink(path)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

    from checker import harness

    harness.prepare()
    sys.exit(observe_rank(script, device, own, key))


def launched() -> bool:
    """Whether this process was started as one rank of a distributed job (a launcher set its rank)."""
    return ("RANK" in os.environ and "WORLD_SIZE" in os.environ) or SPAWNED in os.environ


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
        from checker import harness

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


def sampled(ordinal: int) -> bool:
    """Whether the cross-rank probes record their figures at the ``ordinal``-th update (1-based): every one of the
    first 64, then every 16th, so that long runs stay cheap."""
    return ordinal <= 64 or ordinal % 16 == 0


if __name__ == "__main__":
    main()
