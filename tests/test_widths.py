"""What the CLI says besides a check report fits the width it gets, wrapped between words, never inside one:
`--help`, a kata's hints, the errors that list what is known. 80 columns in a pipe, else COLUMNS, else the
terminal's own width."""
from __future__ import annotations

import pytest
from click.testing import CliRunner
from layout import assert_fits, copied_kata, flowing, in_terminal

from katas.bugs import BUGS
from katas.cli import main
from katas.commands.common import references
from katas.workspace import read_metadata

COMMANDS = ["", "check", "new", "interview", "watch"]  # the longest help texts, with examples and exit codes


def kata(*args: str, columns: int | None):
    """A command as in a pipe, COLUMNS set to ``columns`` (or not set)."""
    return CliRunner().invoke(main, [arg for arg in args if arg], env={"COLUMNS": None if columns is None else str(columns),
                                                                       "NO_COLOR": "1"})


def words(text: str) -> set[str]:
    return set(text.split())


def help_of(command: str, columns: int, monkeypatch, capsys) -> str:
    """`kata COMMAND --help` as click writes it for a terminal of ``columns`` (click's own test runner would force
    80 columns)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    main.main([arg for arg in (command, "--help") if arg], prog_name="kata", standalone_mode=False)
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_60_and_80_columns_and_breaks_no_word(command, monkeypatch, capsys):
    wide = help_of(command, 120, monkeypatch, capsys)
    for columns in (60, 80):
        text = help_of(command, columns, monkeypatch, capsys)
        assert_fits(text, columns)
        # Every word is one the wide help has too (click shortens the commands' one-line summaries to fit: "...")
        assert {w for w in words(text) - words(wide) if not w.endswith("...")} == set(), text


def test_hints_wrap_between_words_at_the_width(tmp_path):
    copied_kata("03", tmp_path)
    hints = BUGS[read_metadata(tmp_path / "03.py").bug].hints
    for number, columns in enumerate((60, None), start=1):
        said = kata("hint", "03", "--dir", str(tmp_path), columns=columns)
        assert said.exit_code == 0 and (len(said.output.splitlines()) > 1 or columns is None)  # a long hint wrapped
        assert_fits(said.output, columns or 80)
        assert flowing(said.output.splitlines()) == f"Hint {number} of 3: {' '.join(hints[number - 1].split())}"


def test_errors_that_list_what_is_known_wrap_between_words(tmp_path):
    for columns in (60, None):
        bug = kata("explain", "lek", columns=columns)
        reference = kata("new", "--ref", "clasifier", "--dir", str(tmp_path), columns=columns)
        for result, known in ((bug, f"Known bugs: {', '.join(BUGS)}"),
                              (reference, f"References: {', '.join(references())}")):
            assert result.exit_code == 2 and "Did you mean" in result.stderr
            assert_fits(result.stderr, columns or 80)
            assert known in flowing(result.stderr.splitlines()), result.stderr


def test_in_a_terminal_help_and_errors_take_the_terminal_s_width():
    for args in (["--help"], ["explain", "lek"]):
        code, written = in_terminal(args, 60, env={"NO_COLOR": "1"})
        assert code in (0, 2) and len(written.splitlines()) > 5
        assert_fits(written, 60)
