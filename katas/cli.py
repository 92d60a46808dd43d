"""The `kata` command."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from katas import __version__

EXIT_CODES = """\b
Exit codes:
  0  every check passed
  1  a symptom is present (or a check could not observe)
  2  usage error
  3  the script failed to run (crashed, exited early, raised)
  4  the script timed out"""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kata")
def main() -> None:
    """Practise debugging PyTorch training scripts.

    \b
    Start here:
      kata check reference/classifier.py   watch a correct script train
    """


@main.command(epilog=EXIT_CODES)
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the script trains (passed to it as KATA_DEVICE).")
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True, metavar="S",
              help="Stop the script after S seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print only a versioned JSON report.")
def check(path: Path, device: str, timeout: float, as_json: bool) -> None:
    """Run a training script under observation and report the symptoms it shows.

    The script runs in a separate Python process, in a scratch folder, exactly
    as `python PATH` would. PyTorch hooks watch it train; each probe decides
    from what the program did, never from its text. The file is not modified.

    \b
    Probes: grads-accumulate, graphs-retained, eval-mode, train-mode,
    gradient-flow, lr-schedule, non-finite, worker-rng, clip-order,
    and the health gate (the script must still train and learn).
    """
    from checker.runner import run
    from checker.verdict import judge

    report = judge(run(path, device, timeout), str(path), device, timeout)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        from katas.render import make_console, show

        show(report, make_console(), f"kata check {shlex.quote(str(path))}")
    sys.exit(report.exit_code)
