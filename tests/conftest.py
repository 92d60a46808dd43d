"""Shared helpers: run scripts under the checker, concurrently, once per session."""
from __future__ import annotations

import atexit
import os
import queue
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from checker.runner import Limits, child_env, run
from checker.verdict import Report, judge
from checker.warm import WarmServer

# Checks run side by side; one math thread each keeps them from starving one another.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
REFERENCES = ROOT / "reference"


WORKERS = max(2, os.cpu_count() or 2)
_servers: queue.Queue = queue.Queue()


def check(path: Path, device: str = "cpu", timeout: float = 120) -> Report:
    """Check a script through a warm server (torch already imported), as `kata check` would."""
    try:
        server = _servers.get_nowait()
    except queue.Empty:
        server = WarmServer(child_env())
        atexit.register(server.close)
    try:
        limits = Limits(timeout=timeout)
        return judge(run(path, device, limits, warm=server), str(path), device, limits)
    finally:
        _servers.put(server)


def check_all(paths: list[Path]) -> dict[Path, Report]:
    """Check many scripts at once: each check is its own process, so threads suffice."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(paths, pool.map(check, paths)))


def failed_probes(report: Report) -> set[str]:
    return {f.probe for f in report.findings if f.failed}


@pytest.fixture(scope="session")
def checked():
    """Lazily checks scripts, caching reports for the whole session."""
    cache: dict[Path, Report] = {}

    def get(*paths: Path) -> list[Report]:
        missing = [p for p in paths if p not in cache]
        cache.update(check_all(missing))
        return [cache[p] for p in paths]

    return get
