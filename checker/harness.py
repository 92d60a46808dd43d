"""Observing one run in this process: the machinery :mod:`checker.checked` (the checked process), a rank
(:mod:`checker.ranks`) and a process the script starts (:mod:`checker.spawned`) share.

Installs the observers, runs the script as ``__main__`` (as ``python SCRIPT``
would, with ``KATA_DEVICE`` set), then writes what it saw, signed, to
``CHANNEL_DIR/record.json``. The ``kata`` process judges that record; it never
reads the script's own output for the verdict.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import runpy
import sys
import time
import traceback
from typing import Callable

from checker import record

HEARTBEAT = "heartbeat"
CHECKER = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the checker's own files
_kept: list[dict] = []


def script_traceback(exc: BaseException, script: str) -> str:
    """The traceback of what the script raised, as its own: from the script's first frame down (never what ran it:
    the checker, ``runpy``), keeping the frames of files in its folder (the script and the modules of its own it
    imports), never the checker's."""
    script = os.path.abspath(script)
    folder = os.path.dirname(script) + os.sep
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, frame in enumerate(frames) if frame.filename == script), 0)
    own = [frame for frame in frames[first:] if frame.filename.startswith(folder) and not frame.filename.startswith(CHECKER)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(own)] if own else []
    return "".join(lines + traceback.format_exception_only(type(exc), exc)).rstrip()


def run_script(script: str, device: str) -> dict:
    """How the script ended, and when (a distributed run's ranks are ordered by it)."""
    outcome = _run_script(script, device)
    outcome["ended_at"] = time.time()
    return outcome


def _run_script(script: str, device: str) -> dict:
    from checker import mirror
    from checker.plan import PrefixReached, current

    plan = current()
    mirror.enter()  # the scratch folder, which mirrors the user's: their files are read, never written
    os.environ["KATA_DEVICE"] = device
    sys.argv = [script, *plan.args]
    try:
        if plan.module:  # as `python -m MODULE` run from path0
            sys.path[0] = plan.path0
            _kept.append(runpy.run_module(plan.module, run_name="__main__", alter_sys=True))
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            if plan.imports and plan.imports != sys.path[0]:  # a kata made from a script that imports its neighbours
                sys.path.insert(1, plan.imports)
            _kept.append(runpy.run_path(script, run_name="__main__"))  # its objects stay alive for the summary
    except PrefixReached:  # stopped where the plan said (--steps, --epochs): what ran is what is judged
        return {"status": "prefix"}
    except SystemExit as exc:
        return exit_outcome(exc, os.path.dirname(os.path.abspath(script)))
    except BaseException as exc:  # noqa: BLE001 - the script's failure is the result
        return {"status": "exception", "error": f"{type(exc).__name__}: {exc}",
                "traceback": script_traceback(exc, script)}
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return {"status": "finished", "code": 0}


def exit_outcome(exc: SystemExit, folder: str) -> dict:
    """How a ``sys.exit`` (``exit()``, ``raise SystemExit``) ended the script: its status, and, when it was raised
    inside a loop of the script's own code, where (an exit in the middle of the training loop is not an ending)."""
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    outcome = {"status": "finished" if code == 0 else "exit", "code": code, "exit_called": True}
    where = looping_frame(exc.__traceback__, folder + os.sep)
    if where:
        outcome["in_loop"] = where
    return outcome


def looping_frame(tb, folder: str) -> str:
    """``file:line (in function)`` of the outermost frame of the script's own files that was running a loop
    (``for`` or ``while``) when the exception passed through it; empty when none was. Read from the running
    code's jumps: an instruction between a backward jump's target and the jump is inside that loop."""
    places = []
    while tb is not None:
        places.append((tb.tb_frame.f_code, tb.tb_lasti, tb.tb_lineno))
        tb = tb.tb_next
    return looping(places, folder)


def looping_stack(frame, folder: str) -> str:
    """The same, for the frames running now (innermost first), as at a call of ``os._exit``."""
    places = []
    while frame is not None:
        places.append((frame.f_code, frame.f_lasti, frame.f_lineno))
        frame = frame.f_back
    return looping(places[::-1], folder)


def looping(places: list, folder: str) -> str:
    import dis

    for code, offset, line in places:  # outermost first
        path = os.path.abspath(code.co_filename)
        if path.startswith(folder) and not path.startswith(CHECKER) and inside_loop(code, offset, dis):
            return f"{os.path.basename(code.co_filename)}:{line} (in {code.co_name})"
    return ""


def inside_loop(code, offset: int, dis) -> bool:
    for instruction in dis.get_instructions(code):
        target = instruction.argval if instruction.opcode in dis.hasjrel + dis.hasjabs else None
        if isinstance(target, int) and target <= offset < instruction.offset and "JUMP" in instruction.opname:
            return True
    return False


def prepare() -> None:
    """Import torch (with dynamo deferred) and the observers: everything a check needs before the script."""
    from checker import fast_start

    fast_start.install()
    import checker.probes  # noqa: F401
    import checker.session  # noqa: F401

    settle_heap()


def settle_heap() -> None:
    """Set what was imported so far aside from the cyclic garbage collector: torch's modules live for the whole
    run, and every full collection would walk them again (0.1 s each, more than a small script's training). The
    script's own objects are collected as they would be."""
    import gc

    gc.collect()
    gc.freeze()


_inherited: dict = {}  # this process's observed session, and the pid it belongs to (a forked child inherits both)


def leave_inherited() -> None:
    """In a child forked from an observed process: put away the parent's instrumentation (its hooks feed the
    parent's session), so that the child can observe itself."""
    session = _inherited.get("session")
    if session is not None and _inherited.get("pid") != os.getpid():
        session.patches.undo()
        _inherited.clear()


def observe(run: Callable[[], dict], device: str, channel_dir: str, key: str,
            spawns: Callable[[str, str, str, object], None] | None = None) -> dict:
    """Install the observers, ``run()`` (which returns the outcome), and write the signed record.

    A script that ends its process with ``os._exit`` writes the record on its way out, with what was seen until
    then: an ``os._exit`` in the middle of training is reported as such, never as a run without a record. With
    ``spawns`` (:func:`checker.spawned.observe_spawned`), the processes the script starts are observed as ranks:
    it is called with the device, the channel, the key and the session's patches once the observers are in."""
    from checker.clock import PhaseClock, device_clock
    from checker.instrument import Instrumentation
    from checker.plan import current
    from checker.probes import PROBES
    from checker.session import Session

    session = Session(channel_dir, heartbeat=os.path.join(channel_dir, HEARTBEAT), plan=current())
    if session.plan.profile:
        session.clock = PhaseClock(now=device_clock())
    observers = {}
    for probe in PROBES:
        try:
            observers[probe.id] = probe.observer(session)
        except Exception as exc:  # that probe's error in the report; the script and the other probes still run
            session.errors[probe.id] = f"{type(exc).__name__}: {exc}"
    instrumentation = Instrumentation(session)
    instrumentation.install()
    if spawns is not None:  # the processes this one starts itself are observed too, each as a rank
        spawns(device, channel_dir, key, session.patches)
    _inherited.update(session=session, pid=os.getpid())
    concluded: list[dict] = []

    def conclude(outcome: dict) -> dict:
        if not concluded:
            concluded.append(outcome)
            with beating(session):
                write_record(session, observers, instrumentation, outcome, device, channel_dir, key)
        return concluded[0]

    own, real_exit = os.getpid(), os._exit

    def _exit(status: int) -> None:
        if os.getpid() == own:  # not a forked DataLoader worker or child, which end this way by design
            outcome = {"status": "finished" if status == 0 else "exit", "code": status, "exit_called": True,
                       "os_exit": True, "ended_at": time.time(), **training_state(session)}
            where = looping_stack(sys._getframe(1), sys.path[0] + os.sep) if sys.path and sys.path[0] else ""
            if where:
                outcome["in_loop"] = where
            conclude(outcome)
        real_exit(status)

    session.patches.patch(os, "_exit", functools.wraps(real_exit)(_exit))
    outcome = run()
    # before the record: once it is written, the runner ends the process group, workers and all
    instrumentation.release_workers()
    if session.prefix_stop is not None:
        outcome["prefix"] = session.prefix_stop
    if outcome.get("exit_called"):
        outcome.update(training_state(session))
    return conclude(outcome)


def training_state(session) -> dict:
    """Where training was when the script ended its run: the training pass it was in the middle of, if any."""
    current = session.current
    if current is None or current.loader not in session.training_loaders() or current.exhausted:
        return {}
    loader = current.ref() if current.ref is not None else None
    try:
        total = len(loader) if loader is not None else None
    except TypeError:
        total = None
    return {"open_pass": {"pass": current.index, "batches": current.batches, "of": total}}


@contextlib.contextmanager
def beating(session):
    """The heartbeat goes on while the checker summarises what it saw (a loaded machine may take a while): the
    watchdog's "no progress" is about the script, not about the checker's own work."""
    import threading

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.25):
            session.beat()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def write_record(session, observers: dict, instrumentation, outcome: dict, device: str, channel_dir: str,
                 key: str) -> None:
    import torch

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
