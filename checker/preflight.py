"""Checks on the file itself, before anything runs: each problem is one clear line and an exit code."""
from __future__ import annotations

import traceback
from pathlib import Path

from checker.exits import EXIT_SCRIPT_FAILED, EXIT_USAGE


class Unusable(Exception):
    def __init__(self, message: str, exit_code: int, detail: str = ""):
        super().__init__(message)
        self.exit_code, self.detail = exit_code, detail


def preflight(path: Path) -> None:
    """Raise ``Unusable`` unless ``path`` is a non-empty UTF-8 Python script that compiles. `kata check` and
    `kata new --from` both refuse a file this way."""
    if not path.exists():
        raise Unusable(f"{path} does not exist: check the path", EXIT_USAGE)
    if path.is_dir():
        raise Unusable(f"{path} is a directory: give the path of a .py script", EXIT_USAGE)
    if path.suffix != ".py":
        raise Unusable(f"{path} is not a Python script (.py): give the training script itself", EXIT_USAGE)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unusable(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8", EXIT_USAGE) from None
    if not text.strip():
        raise Unusable(f"{path} is empty: nothing to check", EXIT_USAGE)
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:  # one line, and as the detail Python's own report (the line, with a caret)
        where = f", line {exc.lineno}" if exc.lineno else ""
        raise Unusable(f"{path}{where}: syntax error ({exc.msg})", EXIT_SCRIPT_FAILED,
                       "".join(traceback.format_exception_only(exc)).rstrip()) from None
