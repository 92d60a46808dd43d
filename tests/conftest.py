"""Shared helpers: run scripts under the checker, concurrently, once per session."""
from __future__ import annotations

import atexit
import contextlib
import os
import queue
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from checker.plan import Plan
from checker.probes import ADVISORY  # noqa: F401 - the probes that advise, never fail
from checker.runner import Limits, child_env, run
from checker.verdict import Report, judge
from checker.warm import WarmServer

# Checks run side by side; one math thread each keeps them from starving one another.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
REFERENCES = ROOT / "reference"


# Checks side by side: the cores, shared among pytest-xdist's workers when it runs the modules in parallel, and at
# least two per module: a check spends part of its time starting processes and waiting on pipes, where another's
# work fits, and a module that runs alone at the end of the suite still keeps both cores busy.
WORKERS = max(2, (os.cpu_count() or 2) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
_servers: queue.Queue = queue.Queue()


@contextlib.contextmanager
def warm_server():
    """A warm server (torch already imported) of the session's pool, for one check at a time."""
    try:
        server = _servers.get_nowait()
    except queue.Empty:
        server = WarmServer(child_env())
        atexit.register(server.close)
    try:
        yield server
    finally:
        _servers.put(server)


def ranks_of(path: Path) -> int:
    """How many ranks a test script runs as: 2 for a script that joins a process group without starting its
    own ranks (``torch.multiprocessing.spawn``), as under ``torchrun --nproc-per-node 2``; else 1."""
    text = path.read_text()
    return 2 if "init_process_group" in text and not any(f"{start}(" in text for start in ("spawn", "start_processes")) \
        else 1


def interruptible() -> None:
    """``preexec_fn`` of a command a test interrupts with SIGINT, as Ctrl-C in a terminal would: a suite started in
    the background of a non-interactive shell ignores SIGINT, and every process it starts inherits that."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def check(path: Path, device: str = "cpu", timeout: float = 120, expect=None, plan: Plan = Plan()) -> Report:
    """Check a script through a warm server, as `kata check` would (a distributed one as two forked ranks);
    ``expect``: a kata's expectation (checker.expectation), as `kata check` judges a kata; ``plan``: its arguments,
    a prefix to judge (checker.plan)."""
    with warm_server() as server:
        limits = Limits(timeout=timeout)
        return judge(run(path, device, limits, warm=server, nproc=ranks_of(path), plan=plan), str(path), device, limits,
                     expect, plan)


@pytest.fixture(autouse=True, scope="session")
def in_process_checks_run_warm():
    """`kata check` invoked in-process (click's CliRunner) forks its run from the pool's warm servers instead
    of importing torch afresh every time. The cold path keeps its own tests: test_untrusted runs the real
    command as a subprocess, and test_warm compares warm and cold verdicts."""
    import checker.runner

    def warm_run(script, device="cpu", limits=Limits(), warm=None, nproc=1, progress=None, plan=Plan()):
        if warm is not None:
            return run(script, device, limits, warm=warm, nproc=nproc, progress=progress, plan=plan)
        with warm_server() as server:
            return run(script, device, limits, warm=server, nproc=nproc, progress=progress, plan=plan)

    patch = pytest.MonkeyPatch()
    patch.setattr(checker.runner, "run", warm_run)
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def cache_in_a_scratch_folder(tmp_path_factory):
    """`kata new` caches the correct scripts' runs in the user's cache folder: for the tests, one of their own,
    shared by every test of the session (and the processes they start)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield
    patch.undo()


def check_all(paths: list[Path]) -> dict[Path, Report]:
    """Check many scripts at once: each check is its own process, so threads suffice."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(paths, pool.map(check, paths)))


def _planted(case: tuple[str, str, int]) -> str:
    from katas.bugs import BUGS
    from katas.engine.inject import inject

    bug, path, seed = case
    return inject(BUGS[bug], Path(path).read_text(), seed, Path(path).name).source


def plant_all(cases: list[tuple[str, Path, int]]) -> list[str]:
    """The scripts that planting each (bug id, script, seed) gives, planted side by side."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(_planted, [(bug, str(path), seed) for bug, path, seed in cases], chunksize=4))


def failed_probes(report: Report) -> set[str]:
    """Probes that failed, or advise (a performance cost: the check passes, a kata of that cost is not solved)."""
    return {f.probe for f in report.findings if f.flagged}


def course_of(failed: set[str]) -> set[str]:
    """The failed probes that judge how training went rather than what caused it: health, and with it divergence
    (a broken run's loss may climb past its start whatever broke it)."""
    return failed & {"health", "divergence"} if "health" in failed else set()


def verdict_for(report: Report) -> str:
    """The verdict the report's own statuses call for: a failure (or an error) fails, advice alone still passes."""
    return "fail" if any(f.failed for f in report.findings) else "pass"


@pytest.fixture(scope="session")
def checked():
    """Lazily checks scripts, caching reports for the whole session."""
    cache: dict[Path, Report] = {}

    def get(*paths: Path) -> list[Report]:
        missing = [p for p in paths if p not in cache]
        cache.update(check_all(missing))
        return [cache[p] for p in paths]

    return get


# -- nothing a test runs may write into the repository ------------------------------------------------------------
# What the tools themselves leave (pytest's own cache is written when the session ends, after the first listing).
TOOL_CACHES = ("__pycache__", ".pytest_cache", ".ruff_cache")


def untracked() -> set[str] | None:
    """The paths git does not track in the checkout (a whole new folder as one entry), or None outside git."""
    import subprocess

    try:
        listed = subprocess.run(["git", "ls-files", "--others", "--directory"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {line for line in listed.splitlines() if not any(cache in line for cache in TOOL_CACHES)}


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist
        session.config.stash[_UNTRACKED] = untracked()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_UNTRACKED, None)
    if hasattr(session.config, "workerinput") or before is None:
        return
    written = sorted(set(untracked() or ()) - before)
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"FAILED: the tests wrote into the repository: {', '.join(written)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_UNTRACKED = pytest.StashKey[set]()
