"""`kata check`: run a training script under observation."""
from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path

import click

from katas.commands.common import EXIT_CODES, limits_of, observe, prefix_options, ranks_for, refuse, run_options, run_plan


class ProbeListingCommand(click.Command):
    """A command whose help lists the probes, read only when the help is shown: `kata check` itself starts its
    script before the probe modules are imported."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:  # most often the script's own option, given before `--`
            exc.message += f" (the script's own options go after --: kata check train.py -- {exc.option_name} ...)"
            raise

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.help and "{probes}" in self.help:
            self.help = self.help.replace("{probes}", probe_list())
        super().format_help_text(ctx, formatter)


@click.command(cls=ProbeListingCommand, epilog=EXIT_CODES)
@click.argument("path", type=click.Path(path_type=Path), required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- SCRIPT_ARGS...]")
@click.option("-m", "--module", metavar="MODULE",
              help="Run a module of the current folder as `python -m MODULE` would (instead of PATH).")
@run_options
@prefix_options
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report (with every series), "
                                                      "whatever happened.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Also write the report as JUnit XML (one test case per check) for CI to show, whatever happened.")
@click.option("-v", "--verbose", is_flag=True, help="Plot the evidence of every check, not only the failing ones.")
@click.option("--profile", is_flag=True, help="Also say where the time of the training steps went: waiting for data, "
                                              "forward, backward, optimizer step, evaluation, the rest (on CUDA, "
                                              "each phase waits for the GPU).")
@click.option("--diagnose", is_flag=True, help="In a kata or an interview task: name the checks and the causes they "
                                               "point to. Counts as a hint until the kata passes; recorded in a task.")
def check(path: Path | None, script_args: tuple[str, ...], module: str | None, device: str, timeout: float,
          idle: float, memory: float | None, nproc: int | None, steps: int | None, epochs: int | None, as_json: bool,
          junit_path: Path | None, verbose: bool, profile: bool, diagnose: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process exactly as `python PATH
    SCRIPT_ARGS...` would from this folder: its modules import as usual and it
    reads files here, but what it writes goes to a scratch folder (your files
    are never modified). PyTorch hooks watch it train; each probe decides from
    what the program did, never from its text.

    \b
    A long training job: judge its first steps, then stop it.
      kata check train.py --steps 200 -- --config small.yaml
      kata check -m project.train --epochs 1 -- --lr 3e-4
      kata check train.py --steps 100 --junit kata.xml     # in CI
      kata check train.py --steps 100 --profile            # where the step time goes

    \b
    {probes}

    \b
    How much the report tells:
      a script of your own     the diagnosis: each check, and the cause it points to
      a kata, a task's script  symptoms only (what was seen, with its evidence),
                               until the kata passes or you add --diagnose
    """
    from katas.interview import marker

    path, plan = run_plan(path, script_args, module, steps, epochs, profile)
    if junit_path and junit_path.resolve() == path.resolve():
        raise click.UsageError(f"--junit {junit_path} would overwrite the script itself: name another file")
    if marker.is_task_script(path):  # the first check of a task not handed over with `kata interview --start`
        marker.record_check(path)
    report = observe(path, device, limits_of(timeout, idle, memory), nproc=ranks_for(path, nproc),
                     expect=expectation(path), plan=plan)
    injected = None
    if report.ran:
        injected = record_kata(path, report, diagnose)
        report.disclosure = disclosure(path, report, injected, diagnose)
    doc = report.to_json()
    if injected:
        doc["kata"] = {"injected_bug": injected}
    if junit_path:
        from katas.junit import junit_xml
        from katas.workspace import write_text_atomically

        write_text_atomically(junit_path, junit_xml(doc))
    if not report.ran and not as_json:
        refuse(report)
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        from katas.render import make_console, show

        again = f"kata check --nproc {nproc} " if nproc else "kata check "
        target = f"-m {module}" if module else shlex.quote(str(path))
        prefix = f" {plan.describe()}" if plan.prefix else ""
        arguments = " -- " + shlex.join(plan.args) if plan.args else ""
        show(report, make_console(), again + target + prefix + arguments, injected, verbose)
    sys.exit(report.exit_code)


def probe_list() -> str:
    """The probes, in report order, wrapped for ``--help``."""
    from checker.probes import PROBES

    names = [probe.id for probe in PROBES if probe.id != "health"]
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


def expectation(path: Path):
    """What a kata made by `kata new` must show to pass (its bug's probes pass; see checker.expectation), or None
    for a script that is not one."""
    from checker.expectation import Expectation
    from katas.bugs import BUGS
    from katas.engine.inject import ENGINE_VERSION
    from katas.workspace import read_metadata

    info = read_metadata(path)
    if info is None or info.bug not in BUGS:
        return None
    if info.engine != ENGINE_VERSION:
        click.echo(f"Note: {path} was made by kata engine {info.engine}, this is engine {ENGINE_VERSION}; "
                   "the check is the same, but `kata reset` cannot restore it.", err=True)
    return Expectation(frozenset(BUGS[info.bug].probes), frozenset(info.baseline))


def record_kata(path: Path, report, diagnose: bool = False) -> str | None:
    """For a kata (a report judged against its expectation): record whether it is solved, and return its bug's
    status. With ``diagnose``, an unsolved kata is recorded as diagnosed (like a hint)."""
    from katas.state import Progress, record_check, updating

    if report.kata is None:
        return None
    solved = report.exit_code == 0
    record_check(path, solved)
    if diagnose and not solved:
        with updating(path.parent, start=False) as progress:
            progress.setdefault(path.stem, Progress()).diagnosed = True
    return report.kata
