"""The `kata` command: a group of subcommands, one module each in katas/commands/."""
from __future__ import annotations

import click

from katas import __version__
from katas.commands import check, interview, new


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kata")
def main() -> None:
    """Practise debugging PyTorch training scripts.

    \b
    Start here:
      kata new                             plant a random bug in a reference script
      kata check broken/01.py              check your fix (or any training script)
      kata bugs                            the bugs you can practise on
    """


for command in (new.new, check.check, new.bugs, interview.interview, interview.grade):
    main.add_command(command)
