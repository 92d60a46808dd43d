"""The script that raises deep inside calls of its own (tests/untrusted/raises_deep.py), and the frames its traceback
must show: its own and its sibling module's, outermost first, never what ran it (the checker, runpy)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "untrusted"
RAISES_DEEP = ("raises_deep.py", "units.py")
FRAMES = [("raises_deep.py", 13, "<module>"), ("raises_deep.py", 8, "step"), ("units.py", 6, "rescale")]
ERROR = "KeyError: 'avg'"


def copy_raises_deep(folder: Path) -> Path:
    """The script and its module, copied into ``folder``; the script's path."""
    for name in RAISES_DEEP:
        shutil.copy(CORPUS / name, folder / name)
    return folder / RAISES_DEEP[0]


def frames(traceback: str) -> list[tuple[str, int, str]]:
    """(file name, line, function) of each frame a printed traceback shows, outermost first."""
    return [(Path(path).name, int(line), function)
            for path, line, function in re.findall(r'File "([^"]+)", line (\d+), in (\S+)', traceback)]
