"""Run a script under observation in a separate process and collect what the observers recorded."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from checker.harness import RECORD

OUTPUT_TAIL = 4000
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


@dataclass
class Run:
    record: dict | None
    returncode: int | None
    timed_out: bool
    output: str
    seconds: float


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))


class ColdChild:
    """A fresh ``python -m checker.harness`` process."""

    def __init__(self, script: str, device: str, channel: str, scratch: str, log: str):
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "checker.harness", script, device, channel],
                                         cwd=scratch, env=child_env(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
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


def run(script: Path, device: str = "cpu", timeout: float = 120.0, warm=None) -> Run:
    """Run ``script`` in its own process group and scratch folder; never touches the script's folder.

    ``warm`` (a ``checker.warm.WarmServer``) forks the run from a process that already imported torch.
    """
    channel = tempfile.mkdtemp(prefix="kata-channel-")
    scratch = tempfile.mkdtemp(prefix="kata-run-")
    log_path = os.path.join(channel, "output.log")
    started = time.perf_counter()
    try:
        launch = warm.start if warm is not None else ColdChild
        child = launch(str(script.resolve()), device, channel, scratch, log_path)
        timed_out = not child.wait(timeout)
        _kill_group(child.pid)  # the script and everything it started (DataLoader workers included)
        child.wait(None)
        seconds = time.perf_counter() - started
        return Run(_read_record(channel), child.returncode, timed_out, _tail(log_path), seconds)
    finally:
        shutil.rmtree(channel, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read_record(channel: str) -> dict | None:
    try:
        with open(os.path.join(channel, RECORD)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if record.get("complete") else None


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - OUTPUT_TAIL))
        return f.read().decode("utf-8", "replace")
