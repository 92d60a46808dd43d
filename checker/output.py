"""The script's output: read from a pipe, kept in a capped log file, its tail kept for the report."""
from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

LOG_CAP = 20 * 2**20  # bytes kept in the log file
TAIL = 4000  # characters shown in reports
KEEP_LOGS = 100  # newest logs kept; older ones go once they are an hour old
MAX_AGE = 3600


def log_folder() -> Path:
    folder = Path(tempfile.gettempdir()) / "torch-katas-logs"
    folder.mkdir(exist_ok=True)
    return folder


class OutputReader(threading.Thread):
    """Drains a FIFO until every writer has closed it (the script and all it started)."""

    def __init__(self, fifo: str, name: str):
        super().__init__(daemon=True)
        self.fifo = fifo
        self.log_path = log_folder() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(self):x}.log"
        self.total = 0
        self.last_output = time.monotonic()
        self._tail = bytearray()
        prune(log_folder())

    def run(self) -> None:
        with open(self.fifo, "rb", buffering=0) as pipe, open(self.log_path, "wb") as log:
            while chunk := pipe.read(65536):
                self.last_output = time.monotonic()
                if self.total < LOG_CAP:
                    log.write(chunk[:LOG_CAP - self.total])
                    if self.total + len(chunk) >= LOG_CAP:
                        log.write(b"\n[log truncated: the script printed more than 20 MB]\n")
                self.total += len(chunk)
                self._tail = (self._tail + chunk)[-TAIL * 4:]

    @property
    def tail(self) -> str:
        return bytes(self._tail).decode("utf-8", "replace")[-TAIL:]

    @property
    def truncated(self) -> bool:
        return len(self.tail.encode()) < self.total


def prune(folder: Path) -> None:
    """Remove logs beyond the newest ``KEEP_LOGS`` once they are an hour old (a log still being written is newer;
    other checks may be pruning at the same time). One directory scan: cheap however many logs a busy day left."""
    logs = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".log"):
                try:
                    logs.append((entry.stat().st_mtime, entry.path))
                except FileNotFoundError:
                    continue
    now = time.time()
    for mtime, old in sorted(logs)[:-KEEP_LOGS]:
        if now - mtime > MAX_AGE:
            Path(old).unlink(missing_ok=True)
