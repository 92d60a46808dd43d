"""Run a script under observation in a separate process, watch it, and collect what the observers recorded.

The script runs in its own process group, in a scratch folder, with its output
going through a pipe into a capped log. A watchdog ends it (and everything it
started) on the wall-clock limit, after a stretch without progress, or when it
uses more memory than allowed. The record comes back over a signed channel.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from checker import processes, record
from checker.harness import HEARTBEAT
from checker.output import OutputReader

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
POLL = 0.05


@dataclass(frozen=True)
class Limits:
    timeout: float = 300.0  # seconds, wall clock
    idle: float = 30.0  # seconds without progress (torch activity or output)
    memory_mb: float | None = None  # memory of all the script's processes together; None: no limit


@dataclass
class Run:
    record: dict | None
    returncode: int | None
    ended: str  # exited | timeout | idle | memory | interrupted
    output: str  # the tail of what the script printed
    output_truncated: bool
    log_path: str
    seconds: float
    forged: bool = False  # a record was there but its signature did not match
    leftovers: int = 0  # processes still alive when the script ended, and ended by the checker


def default_memory_mb() -> float | None:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError):
        return None
    return min(8192.0, 0.75 * total)


def child_env(token: str = "") -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
                PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
                **({processes.TOKEN_VARIABLE: token} if token else {}))


class ColdChild:
    """A fresh ``python -m checker.harness`` process; the signing key goes in through its stdin."""

    def __init__(self, script: str, device: str, channel: str, scratch: str, fifo: str, key: str, token: str):
        with open(fifo, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "checker.harness", script, device, channel],
                                         cwd=scratch, env=child_env(token), stdin=subprocess.PIPE, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.proc.stdin.write((key + "\n").encode())
        self.proc.stdin.close()
        self.pid = self.proc.pid

    def wait(self, timeout: float | None) -> bool:
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode


def run(script: Path, device: str = "cpu", limits: Limits = Limits(), warm=None) -> Run:
    """Run ``script`` under observation; never writes to the script's folder.

    ``warm`` (a ``checker.warm.WarmServer``) forks the run from a process that already imported torch.
    """
    channel = tempfile.mkdtemp(prefix="kata-channel-")
    scratch = tempfile.mkdtemp(prefix="kata-run-")
    fifo = os.path.join(channel, "output")
    os.mkfifo(fifo)
    key, token = secrets.token_hex(32), secrets.token_hex(8)
    reader = OutputReader(fifo, script.stem)
    reader.start()
    started = time.monotonic()
    child = None
    try:
        launch = warm.start if warm is not None else ColdChild
        child = launch(str(script.resolve()), device, channel, scratch, fifo, key, token)
        ended = watch(child, channel, reader, limits, started)
    except KeyboardInterrupt:
        ended = "interrupted"
    finally:
        # A cold child's descendants carry the token; a warm child's do not (the warm server, their subreaper,
        # ends whatever they leave), so for it only the process group is scanned.
        leftovers = processes.end(child.pid, token if warm is None else None) if child is not None else 0
        if child is not None:
            child.wait(None)
        if child is None:  # nothing ever opened the pipe: let the reader go
            with open(fifo, "wb"):
                pass
        reader.join(5)
    try:
        found, forged = record.read(channel, key)
        return Run(found, child.returncode if child else None, ended, reader.tail, reader.truncated,
                   str(reader.log_path), time.monotonic() - started, forged, leftovers)
    finally:
        shutil.rmtree(channel, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def watch(child, channel: str, reader: OutputReader, limits: Limits, started: float) -> str:
    """Wait for the child; end it early on a limit. Returns how it ended.

    Once the record is written the run is over: what remains is the interpreter shutting down, which
    the caller cuts short by ending the process group.
    """
    heartbeat = os.path.join(channel, HEARTBEAT)
    written = os.path.join(channel, record.RECORD)
    next_memory_check = 0.0
    while not child.wait(POLL) and not os.path.exists(written):
        now = time.monotonic()
        if now - started > limits.timeout:
            return "timeout"
        try:
            beat = time.monotonic() - (time.time() - os.stat(heartbeat).st_mtime)
        except OSError:
            beat = started
        if now - max(beat, reader.last_output, started) > limits.idle:
            return "idle"
        if limits.memory_mb and now >= next_memory_check:
            next_memory_check = now + 0.5
            if processes.memory_mb(processes.group_members(child.pid)) > limits.memory_mb:
                return "memory"
    return "exited"
