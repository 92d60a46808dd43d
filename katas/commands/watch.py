"""`kata watch`: re-check a script every time it is saved, from a process that keeps torch imported."""
from __future__ import annotations

import contextlib
import queue
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import click

from katas.commands.common import KataError, kata_imports, limits_of, preload, ranks_for, run_options
from katas.commands.learner import DIR_OPTION, KATA_ARGUMENT, kata_path

READY = "watching: save to re-check (Ctrl-C to stop)"
PIPE_EVERY = 5.0  # seconds between progress lines when the output is not a terminal


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


@contextlib.contextmanager
def progress_line(console, doing: str, before: str) -> Iterator[Callable[[int | None], None]]:
    """Show what runs now: a spinner line in a terminal, with ``before`` until the script reports its training
    steps (see ``checker.runner.run``'s ``progress``), then the steps; plain lines when piped, one at the start
    and one every PIPE_EVERY seconds. Yields the function to call with the steps (None: none reported yet)."""
    started = time.monotonic()

    def line(steps: int | None) -> str:
        now = before if steps is None else f"{steps} training step{'' if steps == 1 else 's'}"
        return f"{doing}: {now}… {time.monotonic() - started:.0f} s"

    if console.is_terminal:
        with console.status(line(None)) as status:
            yield lambda steps: status.update(line(steps))
        return
    console.print(f"{doing}: {before}…", highlight=False)
    next_line = started + PIPE_EVERY

    def report(steps: int | None) -> None:
        nonlocal next_line
        if time.monotonic() >= next_line:
            next_line += PIPE_EVERY
            console.print(line(steps), highlight=False)

    yield report


@click.command()
@KATA_ARGUMENT
@click.option("--poll", is_flag=True, help="Poll for changes instead of using native file events "
                                          "(network drives, containers, or when native watching fails).")
@DIR_OPTION
@run_options
def watch(kata: str, poll: bool, folder: Path | None, device: str, timeout: float, idle: float,
          memory: float | None, nproc: int | None) -> None:
    """Check KATA (03, or any script's path) now and again after every save.

    The first check starts at once, in a fresh process, while a checker that
    keeps torch imported starts beside it; each re-check forks from that one,
    so it costs about the script's own run time (a distributed script's ranks,
    --nproc, are forked with the environment PyTorch's launcher gives them).
    While a check runs, a status line shows the training steps taken. Output is
    plain when not in a terminal: progress lines, no spinner.
    """
    sys.stdout.reconfigure(line_buffering=True)  # each report appears when written, in a pipe too
    path = kata_path(kata, folder)
    if not path.is_file():
        raise KataError(f"no such script: {path}")
    click.echo("starting: importing torch…")
    from checker.runner import child_env
    from checker.warm import WarmServer

    server = WarmServer(child_env(), wait=False)  # imports torch while the first check runs
    try:
        watch_and_check(path, kata if folder is None else f"{kata} --dir {shlex.quote(str(folder))}", poll, device,
                        limits_of(timeout, idle, memory), ranks_for(path, nproc), server)
    finally:
        server.close()
    click.echo("Stopped watching.")


def watch_and_check(path: Path, again: str, poll: bool, device: str, limits, ranks: int, server) -> None:
    """Check now, cold, and after every save, forked from ``server`` (once it serves), until Ctrl-C."""
    # what judges and shows a run loads while the first one runs
    threading.Thread(target=preload, args=("checker.verdict", "katas.commands.check"), daemon=True).start()
    from checker.plan import Plan
    from checker.preflight import Unusable, preflight
    from checker.runner import run
    from katas.render import make_console, show

    console = make_console()
    saves = start_watching(path.resolve(), poll, again)

    def warm_server():
        """The warm server, once it serves (waited for with a status line); None, with a note, if it failed."""
        nonlocal server
        if server is not None and not server.ready(0):
            try:
                with progress_line(console, "waiting for the warm checker", "importing torch"):
                    server.ready(None)
            except RuntimeError as exc:
                console.print(f"[yellow]{exc}; each check runs in a fresh process.[/]")
                server = None
        return server

    def check_once(warm) -> bool:
        """Check and report; False once the user interrupted."""
        started = time.monotonic()
        try:
            preflight(path)
        except Unusable as exc:
            console.print(f"[red]{exc}[/]" + (f"\n{exc.detail}" if exc.detail else ""))
        else:
            with progress_line(console, f"checking {path}", "starting" if warm else "importing torch") as progress:
                result = run(path, device, limits, warm=warm, nproc=ranks, progress=progress,
                             plan=Plan(imports=kata_imports(path)))
            from checker.verdict import judge
            from katas.commands.check import disclosure, expectation, record_kata

            report = judge(result, str(path), device, limits, expectation(path))
            if report.verdict == "interrupted":
                return False
            injected = record_kata(path, report)
            report.disclosure = disclosure(path, report, injected, diagnose=False)
            show(report, console, f"kata check {shlex.quote(str(path))}", injected, rerun="save it: kata watch re-checks it")
        console.print(f"[dim]checked at {time.strftime('%H:%M:%S')} in {time.monotonic() - started:.1f} s; {READY}[/]")
        return True

    try:
        if check_once(None):  # the first check runs cold: it need not wait for the warm server to start
            while True:
                saves.get()
                while not saves.empty():  # several saves during one check: one re-check
                    saves.get()
                console.rule()
                if not check_once(warm_server()):
                    break
    except KeyboardInterrupt:
        pass
