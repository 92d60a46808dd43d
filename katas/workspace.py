"""The learner's workspace: numbered kata files, written atomically, and their metadata.

``kata new`` writes ``broken/NN.py`` and ``broken/.kata/NN.json``. The metadata
says which bug was planted (encoded, so that a glance or a diff of the kata
folder does not give it away) and how to regenerate the file.
"""
from __future__ import annotations

import base64
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

META_DIR = ".kata"
NUMBERED = re.compile(r"^(\d+)\.py$")


@dataclass(frozen=True)
class KataInfo:
    engine: int
    bug: str
    site: str
    reference: str  # a reference name ("classifier") or the path of the user's own script
    seed: int


def metadata_path(script: Path) -> Path:
    return script.parent / META_DIR / f"{script.stem}.json"


def read_metadata(script: Path) -> KataInfo | None:
    try:
        doc = json.loads(metadata_path(script).read_text())
        return KataInfo(**json.loads(base64.b64decode(doc["kata"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _temporary(folder: Path, text: str, prefix: str) -> str:
    """A new file in ``folder`` holding ``text``, with the permissions a plain ``open()`` would give."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return tmp


def write_text_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(_temporary(path.parent, text, f".{path.name}."), path)


def write_metadata(script: Path, info: KataInfo) -> None:
    payload = base64.b64encode(json.dumps(asdict(info), sort_keys=True).encode()).decode()
    write_text_atomically(metadata_path(script), json.dumps({"format": 1, "kata": payload}, indent=2) + "\n")


def numbers(folder: Path) -> list[int]:
    return sorted(int(match[1]) for p in folder.glob("*.py") if (match := NUMBERED.match(p.name)))


def create_numbered(folder: Path, text: str) -> Path:
    """Write ``text`` to the next free ``NN.py``; concurrent callers never share or clobber a number."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(folder, text, ".new-")
    try:
        n = max(numbers(folder), default=0) + 1
        while True:
            target = folder / f"{n:02d}.py"
            try:
                os.link(tmp, target)  # atomic, and fails if the name is taken
                return target
            except FileExistsError:
                n += 1
    finally:
        os.unlink(tmp)


def replace_with_backup(target: Path, text: str) -> Path | None:
    """Overwrite ``target`` (``--force``), keeping the previous version in ``.kata/backup/``."""
    backup = None
    if target.exists():
        folder = target.parent / META_DIR / "backup"
        folder.mkdir(parents=True, exist_ok=True)
        n = len(list(folder.glob(f"{target.stem}.*.py"))) + 1
        backup = folder / f"{target.stem}.{n}.py"
        backup.write_bytes(target.read_bytes())
    write_text_atomically(target, text)
    return backup
