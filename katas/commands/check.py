"""`kata check`: run a training script under observation."""
from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

import click

from katas.commands.common import EXIT_CODES, limits_of, observe, ranks_for, refuse, run_options


class ProbeListingCommand(click.Command):
    """A command whose help lists the probes, read only when the help is shown: `kata check` itself starts its
    script before the probe modules are imported."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.help and "{probes}" in self.help:
            self.help = self.help.replace("{probes}", probe_list())
        super().format_help_text(ctx, formatter)


@click.command(cls=ProbeListingCommand, epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path))
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report (with every series), "
                                                      "whatever happened.")
@click.option("-v", "--verbose", is_flag=True, help="Plot the evidence of every check, not only the failing ones.")
@click.option("--diagnose", is_flag=True, help="In a kata or an interview task: name the checks and the causes they "
                                               "point to. Counts as a hint until the kata passes; recorded in a task.")
def check(path: Path, device: str, timeout: float, idle: float, memory: float | None, nproc: int | None,
          as_json: bool, verbose: bool, diagnose: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process, in a scratch folder, exactly
    as `python PATH` would. PyTorch hooks watch it train; each probe decides
    from what the program did, never from its text. The file is not modified.

    \b
    {probes}

    \b
    How much the report tells:
      a script of your own     the diagnosis: each check, and the cause it points to
      a kata, a task's script  symptoms only (what was seen, with its evidence),
                               until the kata passes or you add --diagnose
    """
    report = observe(path, device, limits_of(timeout, idle, memory), nproc=ranks_for(path, nproc))
    if not report.ran and not as_json:
        refuse(report)
    injected = None
    if report.ran:
        injected = record_kata(path, report, diagnose)
        report.disclosure = disclosure(path, report, injected, diagnose)
    if as_json:
        doc = report.to_json()
        if injected:
            doc["kata"] = {"injected_bug": injected}
        click.echo(json.dumps(doc, indent=2))
    else:
        from katas.render import make_console, show

        again = f"kata check --nproc {nproc} " if nproc else "kata check "
        show(report, make_console(), again + shlex.quote(str(path)), injected, verbose)
    sys.exit(report.exit_code)


def probe_list() -> str:
    """The probes, in report order, wrapped for ``--help``."""
    from checker.probes import PROBES

    names = [probe.ID for probe in PROBES if probe.ID != "health"]
    text = "Probes: " + ", ".join(names) + ", and the health gate (the script must still train and learn)."
    return "\n    ".join(textwrap.wrap(text, 66, break_on_hyphens=False))



def disclosure(path: Path, report, injected: str | None, diagnose: bool) -> str:
    """Symptoms only for an unsolved kata or an interview task's script, unless --diagnose; else the diagnosis."""
    from checker.verdict import DIAGNOSIS, SYMPTOMS
    from katas.interview import marker

    if diagnose:
        if marker.is_task_script(path):
            marker.record_diagnosis(path)
        return DIAGNOSIS
    if injected is not None:
        return DIAGNOSIS if report.exit_code == 0 else SYMPTOMS
    return SYMPTOMS if marker.is_task_script(path) else DIAGNOSIS


def failing(report) -> tuple[str, ...]:
    """What fails in a report, each probe by id and a probe of several criteria (the health gate) by each
    failing criterion ("health: initial loss"), so that one criterion failing before does not excuse another."""
    keys = set()
    for finding in report.findings:
        if finding.failed:
            parts = [part for part in finding.parts if part.failed]
            keys.update([f"{finding.probe}: {part.title}" for part in parts] or [finding.probe])
    return tuple(sorted(keys))


def record_kata(path: Path, report, diagnose: bool = False) -> str | None:
    """For a kata made by `kata new`: record the result, and say whether its bug is fixed.

    A kata passes only when its bug's probes pass and the script still trains: where a probe could not
    observe (n/a) or cannot tell, a report without symptoms becomes a failing one that says so. A kata made from
    your own script is not held to what that script already showed before the bug was planted: with its bug fixed
    and no symptom beyond those, it passes, and the report says which symptoms were there before.
    With ``diagnose``, an unsolved kata is recorded as diagnosed (like a hint).
    """
    from checker.exits import EXIT_PASS, EXIT_SYMPTOM
    from katas.bugs import BUGS
    from katas.engine.inject import ENGINE_VERSION
    from katas.state import Progress, record_check, updating
    from katas.workspace import read_metadata

    info = read_metadata(path)
    if info is None or info.bug not in BUGS:
        return None
    if info.engine != ENGINE_VERSION:
        click.echo(f"Note: {path} was made by kata engine {info.engine}, this is engine {ENGINE_VERSION}; "
                   "the check is the same, but `kata reset` cannot restore it.", err=True)
    bug = BUGS[info.bug]
    status = bug.status(report.statuses())
    failed = [f for f in report.findings if f.failed]
    if report.verdict == "fail" and status == "fixed" and failed and set(failing(report)) <= set(info.baseline):
        report.verdict, report.exit_code = "pass", EXIT_PASS
        report.problem = ("this kata's symptom is gone; what the check still finds was already in the script before "
                          "the bug was planted: " + "; ".join(f.symptom for f in failed))
    if report.verdict == "pass" and report.stopped:
        report.verdict, report.exit_code = "fail", EXIT_SYMPTOM
        report.problem = ("training stopped in the middle of a pass (a break out of the training loop): a kata is "
                          "solved by fixing its bug with all of its training, not by training less")
    elif status != "fixed" and report.verdict == "pass":
        unsure = [f.symptom for f in report.findings if f.probe in bug.probes and f.status != "pass"]
        report.verdict, report.exit_code = "fail", EXIT_SYMPTOM
        report.problem = ("this kata's symptom is still there: " if status == "still present" else
                          "no symptom was found, but the check could not confirm that this kata's symptom is gone: "
                          ) + "; ".join(unsure)
    solved = report.exit_code == 0
    record_check(path, solved)
    if diagnose and not solved:
        with updating(path.parent) as progress:
            progress.setdefault(path.stem, Progress()).diagnosed = True
    return status
