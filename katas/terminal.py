"""How wide to lay text out, and text wrapped to that width at word boundaries (never inside a word).

Imports nothing heavy: `kata new`, the catalogue and the help read it without torch or rich.
"""
from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import TextIO

PIPED = 80  # the width of output that goes to a pipe or a file, unless COLUMNS says otherwise
COLUMN = re.compile(r"\s*\S(?:.*?\S)? {2,}(?=\S)")  # a line's text up to its second column ("  kata new    plants ...")


def columns(stream: TextIO | None = None) -> int:
    """The width of ``stream`` (standard output by default): COLUMNS when set, else the terminal's, else 80."""
    stream = stream or sys.stdout
    declared = os.environ.get("COLUMNS", "")
    if declared.isdigit() and int(declared) > 0:
        return int(declared)
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or PIPED
    except (AttributeError, OSError, ValueError):  # not a real file (captured output)
        pass
    return PIPED


def wrap(text: str, width: int, lead: int = 0) -> str:
    """``text`` wrapped at word boundaries to ``width`` columns, line by line. A continuation lines up under the
    line's second column when it has one (two spaces or more after its first words: a row of a listing, whose
    own continuation lines are joined to it when it is too wide), else under the line's own indent. ``lead``:
    columns already taken on the first line by what is printed before ``text`` ("Error: ")."""
    lines: list[str] = []
    for number, (row, hang) in enumerate(rows(text.split("\n"), width)):
        if all(len(line) + (lead if number == 0 else 0) <= width for line in row):
            lines += row
            continue
        taken = lead if number == 0 else 0
        joined = " ".join([row[0], *(line.strip() for line in row[1:])])
        filled = textwrap.wrap(" " * taken + joined, width, subsequent_indent=" " * hang, break_long_words=False,
                               break_on_hyphens=False)
        lines += [filled[0][taken:], *filled[1:]]
    return "\n".join(lines)


def rows(lines: list[str], width: int):
    """Each line with the lines after it that continue it (indented to its second column), and that column."""
    row: list[str] = []
    hang = 0
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if row and line.strip() and indent == hang > len(row[0]) - len(row[0].lstrip()) and not COLUMN.match(line):
            row.append(line)
            continue
        if row:
            yield row, hang
        column = COLUMN.match(line)
        row, hang = [line], len(column.group()) if column and len(column.group()) <= width // 2 else indent
    if row:
        yield row, hang
