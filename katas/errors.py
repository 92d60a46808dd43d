"""The error every command reports for bad input: one clear message, exit code 2."""
from __future__ import annotations

import sys

import click

from checker.exits import EXIT_USAGE
from katas.terminal import columns, wrap


class KataError(click.ClickException):
    """A clear error for bad input, wrapped at word boundaries to the width of standard error; exit code 2,
    like click's own usage errors."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return wrap(self.message, columns(sys.stderr), lead=len("Error: "))
