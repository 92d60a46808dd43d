"""Run a script under observation in a separate process, watch it, and collect what the observers recorded.

The script runs in its own process group, in a scratch folder that mirrors the folder it was run from
(:mod:`checker.mirror`), with its output
going through a pipe into a capped log. A watchdog ends it (and everything it
started) on the wall-clock limit, after a stretch without progress, or when it
uses more memory than allowed. The record comes back over a signed channel.

With ``nproc`` > 1 the script runs under PyTorch's launcher, one observed process
per rank (:mod:`checker.ranks`); each rank signs its own record with its own key,
and the run is over when every rank has written one or the launcher has ended.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from checker import processes, record
from checker.distributed import COLLECTIVE, FORKED, KEY, STOPPED, rank_dir
from checker.harness import HEARTBEAT
from checker.mirror import SCRATCH_VARIABLE, populate
from checker.output import OutputReader
from checker.plan import Plan

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
POLL = 0.05
PROGRESS_EVERY = 0.25  # seconds between calls of a run's progress callback
SHUTDOWN_GRACE = 5.0  # seconds a distributed run's processes get to exit once every rank wrote its record


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
    ranks: list[RankRun] = field(default_factory=list)  # a distributed run's ranks, in rank order (else empty)
    left_running: list[tuple[int | None, str]] = field(default_factory=list)  # (rank, command) of processes a
    # distributed run's ranks left behind after their launcher ended
    launched: bool = False  # the ranks were started by a launcher (no process of the script's own above them)
    forked: bool = False  # the script started processes it cannot observe (a Process subclass's own run(), spawned)


@dataclass
class RankRun:
    """What one rank of a distributed run left in its part of the channel."""

    rank: int
    record: dict | None
    forged: bool = False
    stopped: str = ""  # the signal the launcher stopped it with (when another rank failed)
    collective: str = ""  # the collective it was waiting in when the run ended


def default_memory_mb() -> float | None:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError):
        return None
    return min(8192.0, 0.75 * total)


def child_env(token: str = "", plan: Plan = Plan()) -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
                PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])),
                **({processes.TOKEN_VARIABLE: token} if token else {}), **plan.environment())


def in_scratch(env: dict[str, str], scratch: str) -> dict[str, str]:
    """A child starts in the checker's folder (``python -m`` puts it first on ``sys.path``: nothing of the user's
    shadows the checker) and moves to ``scratch`` just before the script runs (checker.mirror.enter)."""
    return {**env, SCRATCH_VARIABLE: scratch}


class ColdChild:
    """A fresh ``python -m checker.checked`` process; the signing key goes in through its stdin."""

    def __init__(self, script: str, device: str, channel: str, scratch: str, fifo: str, key: str, token: str,
                 plan: Plan = Plan()):
        with open(fifo, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "checker.checked", script, device, channel],
                                         cwd=PACKAGE_ROOT, env=in_scratch(child_env(token, plan), scratch),
                                         stdin=subprocess.PIPE, stdout=out,
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


class Launcher:
    """``python -m torch.distributed.run --standalone --nproc-per-node N -m checker.ranks ...``: PyTorch's own
    launcher, on the loopback, starting one observed process per rank; each rank's key waits in its channel."""

    def __init__(self, script: str, device: str, channel: str, scratch: str, fifo: str, keys: list[str], token: str,
                 plan: Plan = Plan()):
        for rank, key in enumerate(keys):
            with open(os.open(os.path.join(rank_dir(channel, rank), KEY), os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(key)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={len(keys)}",
                   "--max-restarts=0", "--monitor-interval=0.1", "-m", "checker.ranks", script, device, channel]
        with open(fifo, "wb") as out:
            self.proc = subprocess.Popen(command, cwd=PACKAGE_ROOT, env=in_scratch(child_env(token, plan), scratch),
                                         stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    wait = ColdChild.wait
    returncode = ColdChild.returncode


def run(script: Path, device: str = "cpu", limits: Limits = Limits(), warm=None, nproc: int = 1,
        progress: Callable[[int | None], None] | None = None, plan: Plan = Plan()) -> Run:
    """Run ``script`` under observation; never writes to the script's folder.

    ``warm`` (a ``checker.warm.WarmServer``) forks the run from a process that already imported torch.
    ``nproc`` > 1 runs it as that many ranks of a distributed job, each observed and signing its own record:
    cold, under PyTorch's launcher; warm, forked with the environment the launcher would give them (processes
    they leave are then ended by the warm server, unnamed).
    ``progress`` is called a few times a second while the script runs, with the training steps it has taken
    (its heartbeat's count; the most of any rank), or None before it reported any.
    ``plan``: the script's own arguments, a module run, the prefix of training to judge (:mod:`checker.plan`).
    """
    channel = tempfile.mkdtemp(prefix="kata-channel-")
    scratch = tempfile.mkdtemp(prefix="kata-run-")
    populate(scratch, os.getcwd())  # the script reads relative paths from where `kata check` was run (checker.mirror)
    fifo = os.path.join(channel, "output")
    os.mkfifo(fifo)
    keys, token = [secrets.token_hex(32) for _ in range(nproc)], secrets.token_hex(8)
    dirs = [rank_dir(channel, rank) for rank in range(nproc)] if nproc > 1 else None
    for folder in dirs or []:
        os.makedirs(folder)
    reader = OutputReader(fifo, script.stem)
    reader.start()
    started = time.monotonic()
    child, left = None, []
    try:
        if dirs:
            launch = warm.start_ranks if warm is not None else Launcher
            child = launch(str(script.resolve()), device, channel, scratch, fifo, keys, token, plan)
        else:
            launch = warm.start if warm is not None else ColdChild
            child = launch(str(script.resolve()), device, channel, scratch, fifo, keys[0], token, plan)
        members = (lambda: processes.tagged(token)) if dirs and warm is None else None
        ended = watch(child, channel, reader, limits, started, dirs, members, progress)
        if dirs and ended == "exited" and warm is None:
            left = left_behind(child, token)
    except KeyboardInterrupt:
        ended = "interrupted"
    finally:
        # A cold child's descendants carry the token; a warm child's do not (the warm server, their subreaper,
        # ends whatever they leave), so for it only the process group is scanned.
        leftovers = processes.end(child.pid, token if warm is None else None) if child is not None else 0
        if child is not None:
            child.wait(None)
        else:  # nothing ever opened the pipe: let the reader go
            with open(fifo, "wb"):
                pass
        reader.join(5)
    try:
        found, forged = (None, False) if dirs else record.read(channel, keys[0])
        ranks = collect_ranks(channel, keys if dirs else keys * len(rank_dirs(channel)))  # or those it spawned
        return Run(found, child.returncode if child else None, ended, reader.tail, reader.truncated,
                   str(reader.log_path), time.monotonic() - started, forged or any(r.forged for r in ranks),
                   leftovers, ranks, left, launched=bool(dirs), forked=os.path.exists(os.path.join(channel, FORKED)))
    finally:
        shutil.rmtree(channel, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def rank_dirs(channel: str) -> list[str]:
    """The channel folders ranks wrote to, in rank order (those of ranks the script started itself included)."""
    try:
        found = [name for name in os.listdir(channel) if name.startswith("rank-") and name[5:].isdigit()]
    except OSError:
        return []
    return [os.path.join(channel, name) for name in sorted(found, key=lambda name: int(name[5:]))]


def collect_ranks(channel: str, keys: list[str]) -> list[RankRun]:
    """What each rank left in the channel: its record (checked against its key), a stop, the collective it was in."""
    ranks = []
    for folder, key in zip(rank_dirs(channel), keys):
        found, forged = record.read(folder, key)
        ranks.append(RankRun(int(os.path.basename(folder)[5:]), found, forged, _read(os.path.join(folder, STOPPED)),
                             _read(os.path.join(folder, COLLECTIVE))))
    return ranks


def left_behind(launcher: Launcher, token: str) -> list[tuple[int | None, str]]:
    """Once every rank wrote its record: wait (at most SHUTDOWN_GRACE) for the rank processes to end, and name
    what they left running. The launcher's own shutdown is not waited for: it is ended with the rest."""
    deadline = time.monotonic() + SHUTDOWN_GRACE
    while processes.running(processes.children(launcher.pid)) and not launcher.wait(0):
        if time.monotonic() > deadline:
            return []  # a rank still shutting down: what it would leave cannot be told
        time.sleep(POLL)
    return processes.described([pid for pid in processes.tagged(token) if pid != launcher.pid])


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def watch(child, channel: str, reader: OutputReader, limits: Limits, started: float,
          ranks: list[str] | None = None, members=None, progress: Callable[[int | None], None] | None = None) -> str:
    """Wait for the child; end it early on a limit. Returns how it ended.

    ``ranks``: the channel folders of a distributed run's ranks, each with its heartbeat and record;
    ``members``: what lists the run's processes, for the memory limit (default: the child's process group).
    Once the record is written the run is over: what remains is the interpreter shutting down, which
    the caller cuts short by ending the process group.
    """
    folders = ranks or [channel]
    heartbeats = [os.path.join(folder, HEARTBEAT) for folder in folders]
    written = [os.path.join(folder, record.RECORD) for folder in folders]
    members = members or (lambda: processes.group_members(child.pid))
    next_memory_check = next_listing = next_progress = 0.0
    finished, last_finish, done = 0, started, 0  # ranks that wrote their record, and when the latest did
    while not child.wait(POLL) and not all(os.path.exists(path) for path in written):
        now = time.monotonic()
        if now - started > limits.timeout:
            return "timeout"
        if ranks is None and now >= next_listing:  # ranks the script starts itself beat in their own folders
            next_listing = now + 0.5
            spawned = rank_dirs(channel)
            heartbeats = [os.path.join(folder, HEARTBEAT) for folder in [channel, *spawned]]
            done = sum(os.path.exists(os.path.join(folder, record.RECORD)) for folder in spawned)
        elif ranks is not None:
            done = sum(os.path.exists(path) for path in written)
        if done > finished:  # a rank that finished is finished, not idle: the others' idle time starts again
            finished, last_finish = done, now
        beat = max([started] + [time.monotonic() - (time.time() - mtime) for mtime in map(_mtime, heartbeats) if mtime])
        if now - max(beat, reader.last_output, started, last_finish) > limits.idle:
            return "idle"
        if progress is not None and now >= next_progress:
            next_progress = now + PROGRESS_EVERY
            progress(steps_taken(heartbeats))
        if limits.memory_mb and now >= next_memory_check:
            next_memory_check = now + 0.5
            if processes.memory_mb(members()) > limits.memory_mb:
                return "memory"
    return "exited"


def steps_taken(heartbeats: list[str]) -> int | None:
    """The most training steps any heartbeat reports (None when none has reported yet)."""
    counts = [int(text) for text in map(_read, heartbeats) if text.isdigit()]
    return max(counts, default=None)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
