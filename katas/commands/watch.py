"""`kata watch`: re-check a script every time it is saved, from a process that keeps torch imported."""
from __future__ import annotations

import queue
import shlex
import sys
import threading
import time
from pathlib import Path

import click

from katas.commands.common import KataError, limits_of, ranks_for, run_options
from katas.commands.learner import DIR_OPTION, KATA_ARGUMENT, kata_path

READY = "watching for changes (Ctrl-C to stop)"


def start_watching(target: Path, poll: bool, kata: str) -> queue.Queue:
    """Watch ``target`` from a thread that starts now, so no save is missed; each save lands in the queue."""
    import watchfiles

    saves: queue.Queue = queue.Queue()
    started = threading.Event()
    failure: list[Exception] = []

    def run() -> None:
        try:
            events = watchfiles.watch(target.parent, force_polling=poll or None, yield_on_timeout=True, step=10,
                                      rust_timeout=200, watch_filter=lambda change, name: Path(name).resolve() == target)
            for changes in events:
                started.set()
                if changes:
                    saves.put(changes)
        except Exception as exc:  # native watching can fail (inotify limits, some file systems)
            failure.append(exc)
            started.set()

    threading.Thread(target=run, daemon=True).start()
    started.wait()
    if failure:
        raise KataError(f"cannot watch {target} natively ({failure[0]}); try: kata watch {kata} --poll")
    return saves


@click.command()
@KATA_ARGUMENT
@click.option("--poll", is_flag=True, help="Poll for changes instead of using native file events "
                                          "(network drives, containers, or when native watching fails).")
@DIR_OPTION
@run_options
def watch(kata: str, poll: bool, folder: Path | None, device: str, timeout: float, idle: float,
          memory: float | None, nproc: int | None) -> None:
    """Check KATA (03, or any script's path) now and again after every save.

    Each re-check forks from a process that already imported torch, so it costs
    about the script's own run time (a distributed script's ranks, --nproc, are
    forked with the environment PyTorch's launcher gives them). Output is plain
    when not in a terminal.
    """
    from checker.preflight import Unusable, preflight
    from checker.runner import child_env, run
    from checker.verdict import judge
    from checker.warm import WarmServer
    from katas.commands.check import disclosure, expectation, record_kata
    from katas.render import make_console, show

    sys.stdout.reconfigure(line_buffering=True)  # each report appears when written, in a pipe too
    path = kata_path(kata, folder)
    if not path.is_file():
        raise KataError(f"no such script: {path}")
    limits, console = limits_of(timeout, idle, memory), make_console()
    ranks = ranks_for(path, nproc)
    server = WarmServer(child_env())

    def check_once() -> bool:
        """Check and report; False once the user interrupted."""
        started = time.monotonic()
        try:
            preflight(path)
        except Unusable as exc:
            console.print(f"[red]{exc}[/]" + (f"\n{exc.detail}" if exc.detail else ""))
        else:
            report = judge(run(path, device, limits, warm=server, nproc=ranks), str(path), device, limits,
                           expectation(path))
            if report.verdict == "interrupted":
                return False
            injected = record_kata(path, report)
            report.disclosure = disclosure(path, report, injected, diagnose=False)
            show(report, console, f"kata check {shlex.quote(str(path))}", injected, rerun="save it: kata watch re-checks it")
        console.print(f"[dim]checked at {time.strftime('%H:%M:%S')} in {time.monotonic() - started:.1f} s; {READY}[/]")
        return True

    again = kata if folder is None else f"{kata} --dir {shlex.quote(str(folder))}"
    saves = start_watching(path.resolve(), poll, again)
    try:
        if check_once():
            while True:
                saves.get()
                while not saves.empty():  # several saves during one check: one re-check
                    saves.get()
                console.rule()
                if not check_once():
                    break
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    console.print("Stopped watching.")
