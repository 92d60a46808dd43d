"""The checked process: ``python -m checker.harness SCRIPT DEVICE CHANNEL_DIR`` (signing key on stdin).

Installs the observers, runs the script as ``__main__`` (as ``python SCRIPT``
would, with ``KATA_DEVICE`` set), then writes what it saw, signed, to
``CHANNEL_DIR/record.json``. The ``kata`` process judges that record; it never
reads the script's own output for the verdict.
"""
from __future__ import annotations

import dataclasses
import os
import runpy
import sys
import time
import traceback
from typing import Callable

from checker import ranks, record

HEARTBEAT = "heartbeat"
_kept: list[dict] = []


def script_traceback(exc: BaseException, script: str) -> str:
    """The traceback, keeping only frames from the script's own folder."""
    folder = os.path.dirname(os.path.abspath(script)) + os.sep
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename).startswith(folder)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    return "".join(lines + traceback.format_exception_only(type(exc), exc)).rstrip()


def run_script(script: str, device: str) -> dict:
    """How the script ended, and when (a distributed run's ranks are ordered by it)."""
    outcome = _run_script(script, device)
    outcome["ended_at"] = time.time()
    return outcome


def _run_script(script: str, device: str) -> dict:
    os.environ["KATA_DEVICE"] = device
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        _kept.append(runpy.run_path(script, run_name="__main__"))  # its objects stay alive for the summary
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return {"status": "finished" if code == 0 else "exit", "code": code, "exit_called": True}
    except BaseException as exc:  # noqa: BLE001 - the script's failure is the result
        return {"status": "exception", "error": f"{type(exc).__name__}: {exc}",
                "traceback": script_traceback(exc, script)}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return {"status": "finished", "code": 0}


def prepare() -> None:
    """Import torch (with dynamo deferred) and the observers: everything a check needs before the script."""
    from checker import fast_start

    fast_start.install()
    import checker.probes  # noqa: F401
    import checker.session  # noqa: F401


def check(script: str, device: str, channel_dir: str, key: str) -> dict:
    """Observe one run of ``script`` in this process and write the signed record to ``channel_dir``; returns how
    the script ended."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        outcome = {"status": "no-cuda"}
        record.write(channel_dir, {"schema": record.SCHEMA, "complete": True, "outcome": outcome}, key)
        return outcome
    if not ranks.launched():  # ranks this process starts itself (torch.multiprocessing.spawn) are observed too
        ranks.observe_spawned(device, channel_dir, key)
    return observe(lambda: run_script(script, device), device, channel_dir, key)


def observe(run: Callable[[], dict], device: str, channel_dir: str, key: str) -> dict:
    """Install the observers, ``run()`` (which returns the outcome), and write the signed record."""
    import torch

    from checker.instrument import Instrumentation
    from checker.probes import PROBES
    from checker.session import Session

    session = Session(channel_dir, heartbeat=os.path.join(channel_dir, HEARTBEAT))
    observers = {}
    for probe in PROBES:
        try:
            observers[probe.ID] = probe.Observer(session)
        except Exception as exc:  # that probe's error in the report; the script and the other probes still run
            session.errors[probe.ID] = f"{type(exc).__name__}: {exc}"
    instrumentation = Instrumentation(session)
    instrumentation.install()
    outcome = run()
    session.script_globals = _kept[-1] if _kept else {}
    try:
        session.finish()
    except Exception as exc:  # the run's last manual update could not be read: said, never hidden
        session.errors["session"] = f"{type(exc).__name__}: {exc}"

    observations = {}
    for probe_id, observer in observers.items():
        try:
            observations[probe_id] = dataclasses.asdict(observer.summary())
        except Exception as exc:  # reported as that probe's error, never as a pass
            session.errors[probe_id] = f"{type(exc).__name__}: {exc}"
    record.write(channel_dir, {
        "schema": record.SCHEMA,
        "complete": True,
        "device": device,
        "torch": torch.__version__,
        "outcome": outcome,
        "facts": session.summary(instrumentation.tampering()).to_json(),
        "observations": observations,
    }, key)
    return outcome


def main() -> None:
    script, device, channel_dir = sys.argv[1:4]
    key = sys.stdin.readline().strip()  # read before the script can; stdin is then empty
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    prepare()
    check(script, device, channel_dir, key)


if __name__ == "__main__":
    main()
