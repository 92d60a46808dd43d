"""`kata check`: run a training script under observation."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from checker.verdict import EXIT_SYMPTOM
from katas.commands.common import EXIT_CODES, limits_of, observe, run_options


@click.command(epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path))
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report (with every series).")
@click.option("-v", "--verbose", is_flag=True, help="Plot the evidence of every probe, not only the failing ones.")
def check(path: Path, device: str, timeout: float, idle: float, memory: float | None, as_json: bool,
          verbose: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process, in a scratch folder, exactly
    as `python PATH` would. PyTorch hooks watch it train; each probe decides
    from what the program did, never from its text. The file is not modified.

    \b
    Probes: grads-accumulate, graphs-retained, eval-mode, train-mode,
    gradient-flow, lr-schedule, non-finite, worker-rng, clip-order,
    and the health gate (the script must still train and learn).
    """
    report = observe(path, device, limits_of(timeout, idle, memory))
    injected = record_kata(path, report)
    if as_json:
        doc = report.to_json()
        if injected:
            doc["kata"] = {"injected_bug": injected}
        click.echo(json.dumps(doc, indent=2))
    else:
        from katas.render import make_console, show

        show(report, make_console(), f"kata check {shlex.quote(str(path))}", injected, verbose)
    sys.exit(report.exit_code)


def record_kata(path: Path, report) -> str | None:
    """For a kata made by `kata new`: record the result, and say whether its bug is fixed.

    A kata passes only when its bug's probes pass and the script still trains: where a probe could not
    observe (n/a) or cannot tell, a report without symptoms becomes a failing one that says so.
    """
    from katas.bugs import BUGS
    from katas.state import record_check
    from katas.workspace import read_metadata

    info = read_metadata(path)
    if info is None or info.bug not in BUGS:
        return None
    bug = BUGS[info.bug]
    status = bug.status(report.statuses())
    if status != "fixed" and report.verdict == "pass":
        unsure = [f.message for f in report.findings if f.probe in bug.probes and f.status != "pass"]
        report.verdict, report.exit_code = "fail", EXIT_SYMPTOM
        report.problem = ("no symptom was found, but the check could not confirm that this kata's symptom is gone: "
                          + "; ".join(unsure))
    record_check(path, report.exit_code == 0)
    return status
