"""`kata check`: run a training script under observation."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from katas.commands.common import EXIT_CODES, limits_of, observe, run_options


@click.command(epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path))
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report.")
def check(path: Path, device: str, timeout: float, idle: float, memory: float | None, as_json: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process, in a scratch folder, exactly
    as `python PATH` would. PyTorch hooks watch it train; each probe decides
    from what the program did, never from its text. The file is not modified.

    \b
    Probes: grads-accumulate, graphs-retained, eval-mode, train-mode,
    gradient-flow, lr-schedule, non-finite, worker-rng, clip-order,
    and the health gate (the script must still train and learn).
    """
    from katas.bugs import BUGS
    from katas.workspace import read_metadata

    report = observe(path, device, limits_of(timeout, idle, memory))
    info = read_metadata(path)
    injected = BUGS[info.bug].status({f.probe: f.status for f in report.findings}) if info and info.bug in BUGS else None
    if as_json:
        doc = report.to_json()
        if injected:
            doc["kata"] = {"injected_bug": injected}
        click.echo(json.dumps(doc, indent=2))
    else:
        from katas.render import make_console, show

        show(report, make_console(), f"kata check {shlex.quote(str(path))}", injected)
    sys.exit(report.exit_code)
