"""A warm checker: one process imports torch once, then forks a fresh child for every script.

The child becomes its own process group, moves to its scratch folder, sends its
output to the run's log and observes the script exactly as a cold
``python -m checker.harness`` would; the forked copy starts from a server that
never ran anything, so no state passes from one check to the next. This saves
importing torch on every check (the test suite, a watch loop).

Protocol, one JSON line each way: the client sends ``{script, device, channel,
scratch, fifo, key}``; the server answers ``{"pid": ...}`` at once and
``{"status": ...}`` when that child ends. The server is a child subreaper: what
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

from checker import harness
from checker.processes import children

PR_SET_CHILD_SUBREAPER = 36


class WarmServer:
    """The client side. Serves one check at a time; use one server per concurrent check."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "checker.warm"], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True)
        if self.proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the warm checker did not start")

    def start(self, script: str, device: str, channel: str, scratch: str, fifo: str, key: str,
              token: str) -> "WarmChild":
        request = {"script": script, "device": device, "channel": channel, "scratch": scratch, "fifo": fifo,
                   "key": key}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        return WarmChild(self, json.loads(self.proc.stdout.readline())["pid"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


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


def run_child(request: dict) -> int:
    """In the forked child: isolate, redirect, observe the script; returns the exit status."""
    try:
        os.setsid()
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
        harness.check(request["script"], request["device"], request["channel"], request["key"])
        return 0
    except BaseException:  # noqa: BLE001 - a failure of the checker itself: no record, reported as such
        import traceback

        traceback.print_exc()
        return 1


def end_orphans() -> None:
    """Kill and reap whatever a finished check left behind (it was reparented to this subreaper)."""
    for pid in children(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def preload() -> None:
    """Import what common scripts make torch import lazily, once for all the checks this server forks: the
    symbolic-shapes module (and sympy) that ``nn.MultiheadAttention`` loads to check a key padding mask (0.6 s
    per check otherwise). It leaves dynamo deferred, so nothing a script does changes."""
    import torch.fx.experimental.symbolic_shapes  # noqa: F401


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
            raise SystemExit(run_child(request))  # unwinds and exits like any Python process
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        end_orphans()
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
