"""The `kata` command: a group of subcommands, one module each in katas/commands/."""
from __future__ import annotations

from pathlib import Path

import click

from katas import __version__
from katas.commands import check, course, interview, learner, new, watch
from katas.terminal import wrap

NON_BREAKING_HYPHEN = "\u2011"  # stands for "-" while click wraps, which would break "--nproc-per-node" after "nproc-"


class FittingHelpFormatter(click.HelpFormatter):
    """Click's help wrapped only between words: its verbatim blocks (the examples, the exit codes) too, where
    they are wider than the terminal, and never at a word's hyphen."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", NON_BREAKING_HYPHEN))

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(term, words.replace("-", NON_BREAKING_HYPHEN)) for term, words in rows], col_max, col_spacing)

    def getvalue(self) -> str:
        return wrap(super().getvalue().replace(NON_BREAKING_HYPHEN, "-"), self.width)


class HelpContext(click.Context):
    formatter_class = FittingHelpFormatter


class KataGroup(click.Group):
    context_class = HelpContext


@click.group(cls=KataGroup, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
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
                learner.solution, learner.reset, new.bugs, interview.interview, interview.grade, course.autograder):
    command.context_class = HelpContext
    main.add_command(command)
