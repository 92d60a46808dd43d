"""Finding and ending everything a checked script started, and measuring its memory (Linux /proc).

Members of the script's process group are found by their group id. Processes
that left the group (``setsid``, double fork) are found by a token in their
environment, which every descendant of the cold child inherits; the warm server
reaps the orphans of its own children itself. Without /proc (not Linux) only
the process group is ended and memory is not limited.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

PROC = Path("/proc")
TOKEN_VARIABLE = "KATA_RUN_TOKEN"


def _pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()] if PROC.is_dir() else []


def _with_stat_field(index: int, value: int) -> list[int]:
    """Processes whose /proc/PID/stat field ``index`` (counted after the command name) equals ``value``."""
    found = []
    for pid in _pids():
        try:
            if int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[index]) == value:
                found.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return found


def group_members(pgid: int) -> list[int]:
    return _with_stat_field(2, pgid)


def children(pid: int) -> list[int]:
    return _with_stat_field(1, pid)


def running(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are still running (not ended, not zombies waiting for their parent)."""
    found = []
    for pid in pids:
        try:
            if (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(pid)
        except (OSError, IndexError):
            continue
    return found


def tagged(token: str) -> list[int]:
    """Processes (other than this one) whose environment carries the run's token."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for pid in _pids():
        try:
            if pid != os.getpid() and needle in (PROC / str(pid) / "environ").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            continue
    return found


def described(pids: list[int]) -> list[tuple[int | None, str]]:
    """(the ``RANK`` in its environment, its command line) of each process that is still there."""
    found = []
    for pid in pids:
        try:
            environ = dict(item.split(b"=", 1) for item in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
                           if b"=" in item)
            command = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rank = environ.get(b"RANK", b"").decode()
        found.append((int(rank) if rank.isdigit() else None, command))
    return found


def memory_mb(pids: list[int]) -> float:
    """Memory held by ``pids`` together: proportional set size, so pages that forked DataLoader
    workers share with their parent count once; resident size where the kernel has no PSS."""
    total_kb = 0
    for pid in pids:
        try:
            rollup = (PROC / str(pid) / "smaps_rollup").read_text()
            total_kb += next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError, IndexError):
            try:
                total_kb += int((PROC / str(pid) / "statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
            except (OSError, ValueError, IndexError):
                continue
    return total_kb / 1024


def end(pgid: int, token: str | None = None) -> int:
    """SIGKILL the process group and, with a token, every tagged process. Returns how many were alive."""
    victims = set(group_members(pgid)) | set(tagged(token) if token else [])
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(victims)
