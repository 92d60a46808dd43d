"""The `kata` command: a group of subcommands, one module each in katas/commands/."""
from __future__ import annotations

from pathlib import Path

import click

from katas import __version__
from katas.commands import check, interview, learner, new, watch


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(__version__, prog_name="kata")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="The kata folder (default: the nearest one here or above).")
@click.pass_context
def main(ctx: click.Context, folder: Path | None) -> None:
    """Practise debugging PyTorch training scripts.

    Run `kata` alone to see your katas and the next command to run.

    \b
    Start here:
      kata new                   plant a random bug in a reference script: practice/NN.py
      kata check practice/01.py  check your fix (or any training script)
      kata watch 01              re-check on every save
      kata hint 01               the next of three graded hints
      kata bugs                  the bugs you can practise on; kata explain BUG for one
      kata check broken/01.py    a ready-made example (a clone's broken/, one per bug)

    \b
    Shell completion (kata numbers, bug ids), e.g. for bash:
      eval "$(_KATA_COMPLETE=bash_source kata)"
    """
    if ctx.invoked_subcommand is None:
        learner.show_status(folder)


for command in (learner.init, new.new, check.check, watch.watch, learner.list_katas, learner.hint, learner.explain,
                learner.solution, learner.reset, new.bugs, interview.interview, interview.grade):
    main.add_command(command)
