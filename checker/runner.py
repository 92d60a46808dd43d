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


def run(script: Path, device: str = "cpu", timeout: float = 120.0) -> Run:
    """Run ``script`` in its own process group and scratch folder; never touches the script's folder."""
    channel = tempfile.mkdtemp(prefix="kata-channel-")
    scratch = tempfile.mkdtemp(prefix="kata-run-")
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    log_path = os.path.join(channel, "output.log")
    started = time.perf_counter()
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "checker.harness", str(script.resolve()), device, channel],
                cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out = False
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        seconds = time.perf_counter() - started
        return Run(_read_record(channel), proc.returncode, timed_out, _tail(log_path), seconds)
    finally:
        shutil.rmtree(channel, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """End the script and everything it started (DataLoader workers included)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


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
