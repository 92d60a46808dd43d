"""`kata autograder`: a kata or an interview task as a Gradescope autograder, for a course."""
from __future__ import annotations

import shlex
from pathlib import Path

import click

from katas.autograder import NEW_SYMPTOM_POINTS, SYMPTOM_POINTS, TRAINS_POINTS, VISIBILITIES
from katas.errors import KataError


@click.command()
@click.argument("target", metavar="KATA_OR_TASK", type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=True, path_type=Path),
              help="A new (or empty) folder for the bundle; its autograder.zip is what you upload.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, metavar="S",
              help="Stop a submission's script after S seconds (it then scores 0, with the reason).")
@click.option("--key", "key_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A task's answer key folder (default: TASK/key).")
@click.option("--visibility", type=click.Choice(VISIBILITIES), default="visible", show_default=True,
              help="When students see their results (Gradescope's setting).")
def autograder(target: Path, out: Path, timeout: float, key_dir: Path | None, visibility: str) -> None:
    """Build a Gradescope autograder that checks every submission of a kata or a task.

    KATA_OR_TASK is a kata made by `kata new` (practice/01.py) or an interview
    task's folder (made by `kata interview --out`). The bundle holds setup.sh
    (Python, CPU torch, this package's requirements), run_autograder (runs
    `kata check` on the submitted script, as a student would, and writes
    results/results.json: a test per criterion, with the symptoms and figures
    the check saw, never the planted bug's name or cause) and this package.
    Gradescope runs each submission in its own container.

    \b
    A kata scores: its symptom gone 3; then no new symptom 1, still trains 1.
    A task scores its key's rubric: 2 per planted bug fixed while the script
    still trains, less 1 per new symptom (the interview's points left out).

    \b
    Examples:
      kata autograder practice/03.py --out hw3-autograder
      kata autograder task --out midterm-autograder --visibility after_due_date
    """
    from katas.autograder import BundleError, build

    try:
        archive, config = build(target, out, timeout, visibility, key_dir)
    except BundleError as exc:
        raise KataError(str(exc)) from None
    if config["kind"] == "kata":
        total = SYMPTOM_POINTS + NEW_SYMPTOM_POINTS + TRAINS_POINTS
    else:
        from katas.interview.score import FIX

        total = FIX * len(config["key"]["bugs"])
    click.echo(f"Autograder for {target} written to {out}/ (setup.sh, run_autograder, kata.json, lib/).")
    click.echo(f"Upload {archive} as the assignment's autograder; students submit {config['script']}; "
               f"set the total points to {total}.")
    click.echo(f"Try it on a submission first: AUTOGRADER_ROOT=DIR AUTOGRADER_PYTHON=$(which python) bash "
               f"{shlex.quote(str(out / 'run_autograder'))}, with DIR/source a copy of {out}/ and DIR/submission/ "
               "the student's files; DIR/results/results.json is what Gradescope reads.")
