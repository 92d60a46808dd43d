"""A warm checker: one process imports torch once, then forks a fresh child for every script.

The child becomes its own process group, moves to its scratch folder, sends its
output to the run's log and observes the script exactly as a cold
``python -m checker.checked`` would; the forked copy starts from a server that
never ran anything, so no state passes from one check to the next. This saves
importing torch on every check (the test suite, a watch loop).

Protocol, one JSON line each way: the client sends ``{script, device, channel,
scratch, fifo, key}`` (for a distributed run, ``keys``: one per rank, instead of
``key``); the server answers ``{"pid": ...}`` at once and ``{"status": ...}`` when
that child ends. A distributed run's child leads the run: it forks one rank per
key with the environment PyTorch's launcher would give it, and, as the launcher
does, stops the other ranks when one fails. The server is a child subreaper: what
a check's script leaves behind (daemons included) becomes the server's child
and is ended before the server reports the check's status.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

from checker import checked, harness, ranks
from checker.distributed import launcher_environment, rank_dir
from checker.plan import Plan
from checker.processes import children
from checker.runner import PACKAGE_ROOT  # the server starts there: nothing of the user's shadows checker

PR_SET_CHILD_SUBREAPER = 36


class WarmServer:
    """The client side. Serves one check at a time; use one server per concurrent check."""

    def __init__(self, env: dict[str, str], wait: bool = True):
        """Start the server; with ``wait``, return once it serves checks (else see :meth:`ready`)."""
        self.proc = subprocess.Popen([sys.executable, "-m", "checker.warm"], env=env, stdin=subprocess.PIPE, cwd=PACKAGE_ROOT,
                                     stdout=subprocess.PIPE, start_new_session=True)
        self.serving = False
        if wait:
            self.ready(None)

    def ready(self, timeout: float | None) -> bool:
        """Whether the server has imported torch and serves checks, waiting at most ``timeout`` seconds for it
        (None: as long as it takes). A server that failed to start raises RuntimeError."""
        if not self.serving:
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                return False
            if self.proc.stdout.readline() != b"ready\n":
                raise RuntimeError("the warm checker did not start")
            self.serving = True
        return True

    def start(self, script: str, device: str, channel: str, scratch: str, fifo: str, key: str,
              token: str, plan: Plan = Plan()) -> "WarmChild":
        return self._request({"script": script, "device": device, "channel": channel, "scratch": scratch,
                              "fifo": fifo, "key": key, "env": plan.environment()})

    def start_ranks(self, script: str, device: str, channel: str, scratch: str, fifo: str, keys: list[str],
                    token: str, plan: Plan = Plan()) -> "WarmChild":
        """A distributed run: one forked rank per key, led by the returned child."""
        return self._request({"script": script, "device": device, "channel": channel, "scratch": scratch,
                              "fifo": fifo, "keys": keys, "env": plan.environment()})

    def _request(self, request: dict) -> "WarmChild":
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        return WarmChild(self, json.loads(self.proc.stdout.readline())["pid"])

    def close(self) -> None:
        """Let the server end; one still importing torch is ended at once (it has started nothing yet)."""
        if not self.serving:
            self.proc.kill()
        self.proc.stdin.close()
        self.proc.wait()


class WarmPool:
    """Warm servers for checks run side by side from a pool of threads: each thread that asks gets its own server
    (started on its first request, then forked from for every check of that thread), all closed together. A server
    that fails to start gives None: that thread's checks run cold."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.local = threading.local()
        self.started: list[WarmServer] = []
        self.lock = threading.Lock()

    def server(self) -> WarmServer | None:
        if not hasattr(self.local, "server"):
            try:
                server = WarmServer(self.env)
            except (OSError, RuntimeError):
                server = None
            self.local.server = server
            if server is not None:
                with self.lock:
                    self.started.append(server)
        return self.local.server

    def close(self) -> None:
        with self.lock:
            for server in self.started:
                server.close()
            self.started.clear()

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WarmChild:
    def __init__(self, server: WarmServer, pid: int):
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None) -> bool:
        """True when the child ended within ``timeout`` seconds (None: wait as long as it takes)."""
        if self.returncode is None:
            ready, _, _ = select.select([self.server.proc.stdout], [], [], timeout)
            if not ready:
                return False
            self.returncode = json.loads(self.server.proc.stdout.readline())["status"]
        return True


def isolate(request: dict) -> None:
    """In a forked child: its own process group, the scratch folder, output to the run's log."""
    os.setsid()
    os.environ.update(request.get("env", {}))
    os.chdir(request["scratch"])
    output = os.open(request["fifo"], os.O_WRONLY)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    os.environ["PYTHONUNBUFFERED"] = "1"
    sys.dont_write_bytecode = True


def run_child(request: dict) -> int:
    """In the forked child: isolate, redirect, observe the script; returns the exit status."""
    try:
        isolate(request)
        checked.check(request["script"], request["device"], request["channel"], request["key"])
        return 0
    except BaseException:  # noqa: BLE001 - a failure of the checker itself: no record, reported as such
        import traceback

        traceback.print_exc()
        return 1


def run_ranks(request: dict) -> int:
    """In the forked child that leads a distributed run: fork the ranks, then wait for them as the launcher would.

    Returns the exit status, in the leader and in each rank (whose caller exits with it)."""
    isolate(request)
    world, started = len(request["keys"]), {}
    store, port = rendezvous_store(world)
    for rank, key in enumerate(request["keys"]):
        pid = os.fork()
        if pid == 0:
            try:
                os.environ.update(launcher_environment(rank, world, port))
                return ranks.observe_rank(request["script"], request["device"],
                                          rank_dir(request["channel"], rank), key)
            except BaseException:  # noqa: BLE001 - a failure of the checker itself: no record, reported as such
                import traceback

                traceback.print_exc()
                return 1
        started[pid] = rank
    try:
        return lead(started)
    finally:
        os.kill(store, signal.SIGKILL)
        os.waitpid(store, 0)


def rendezvous_store(world: int) -> tuple[int, int]:
    """(pid, port) of a process holding the run's rendezvous store on the loopback, listening before any rank
    starts, as PyTorch's launcher holds one (a rank that hosted it would make the others retry for a second).
    Its own process, so that this one forks the ranks without the store's threads."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            from torch.distributed import TCPStore

            store = TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False)
            os.write(write, str(store.port).encode())
            os.close(write)
            signal.pause()
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        return pid, int(answer.read())


def lead(started: dict[int, int], grace: float = 5.0) -> int:
    """Wait for the ranks; when one fails, stop the others (SIGTERM, then SIGKILL after ``grace`` seconds)."""
    failed, deadline = False, None
    while started:
        pid, status = os.waitpid(-1, os.WNOHANG) if deadline else os.waitpid(-1, 0)
        if pid == 0:
            if time.monotonic() > deadline:
                for other in started:
                    os.kill(other, signal.SIGKILL)
                deadline = None
            time.sleep(0.05)
            continue
        if started.pop(pid, None) is None:
            continue
        if os.waitstatus_to_exitcode(status) != 0 and not failed:
            failed, deadline = True, time.monotonic() + grace
            for other in started:
                os.kill(other, signal.SIGTERM)
    return 1 if failed else 0


def end_orphans() -> None:
    """Kill and reap whatever a finished check left behind (it was reparented to this subreaper)."""
    for pid in children(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def preload() -> None:
    """Import what scripts make torch import lazily, once for all the checks this server forks: the
    symbolic-shapes module (and sympy) that ``nn.MultiheadAttention`` loads to check a key padding mask (0.6 s
    per check otherwise), and dynamo itself, which ``init_process_group`` and ``DistributedDataParallel`` load
    (1.5 s per rank otherwise). A cold check defers dynamo (:mod:`checker.fast_start`) because it may never be
    needed; here it is loaded once, and a script runs the same eager code either way."""
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    from checker import fast_start

    fast_start.load()
    harness.settle_heap()


def serve() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):  # not Linux: the process group is all that gets ended
        pass
    harness.prepare()
    preload()
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            # unwinds and exits like any Python process
            raise SystemExit(run_ranks(request) if "keys" in request else run_child(request))
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        end_orphans()
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
