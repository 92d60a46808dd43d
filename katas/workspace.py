"""The learner's workspace: where the katas are, numbered kata files written atomically, and their metadata.

``kata new`` writes ``practice/NN.py`` and ``practice/.kata/NN.json`` (or into the
workspace found here or above). The examples shipped in the repository's ``broken/``
are katas too, but their ``.kata/`` holds a marker (``examples``): they are never
taken for the learner's workspace, so the learner's katas never mix with them.
The metadata says how to regenerate the file; which bug was planted, and where, is sealed
(XOR with a keystream from SHAKE-256), so that neither a glance, nor a diff of
the kata folder, nor a base64 decoder gives it away: `kata solution --reveal` does.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from katas.errors import KataError

META_DIR = ".kata"
DEFAULT_DIR = Path("practice")  # the workspace `kata new` and `kata init` start when there is none
LEGACY_DIR = Path("broken")  # where katas were written before workspaces had their own name; still found
EXAMPLES_MARKER = "examples"  # in the .kata/ of a folder of shipped examples
NUMBERED = re.compile(r"^(\d+)\.py$")
FORMAT = 2
SEAL = b"torch-katas/answer-key/2\0"  # fixed context of the keystream; the nonce varies per kata
SEALED = ("bug", "site")


@dataclass(frozen=True)
class KataInfo:
    engine: int
    bug: str
    site: str
    reference: str  # a reference name ("classifier") or the path of the user's own script
    seed: int
    plain: bool = False  # planted in the script's exact text; otherwise in its disguise (see `kata new --plain`)
    nproc: int = 1  # ranks it runs as (a distributed script is checked under a launcher)
    baseline: tuple[str, ...] = ()  # probes that failed on your own script before the bug was planted
    # What `kata new` told the learner, and the runs it was measured from (katas.observation.Observation.to_json);
    # None when the kata was made before it was measured
    observed: dict | None = None
    guessed: bool = False  # the bug's site was found through a conventional name (`optimizer`), not by structure


def is_examples(folder: Path) -> bool:
    """Whether ``folder`` holds shipped examples (its ``.kata/`` is marked so), not a learner's workspace."""
    return (folder / META_DIR / EXAMPLES_MARKER).is_file()


def find_workspace(start: Path | None = None) -> Path | None:
    """The learner's workspace nearest to ``start`` (default: the current folder), itself or above, found as git
    finds a repository.

    A workspace holds ``.kata/`` and is not a folder of examples; a folder holding ``practice/.kata/`` (or, as
    before workspaces had their own name, ``broken/.kata/``) stands for it. The answer is relative to the current
    folder (``practice``, ``../practice``, ``.``).
    """
    return _nearest(start, lambda candidate: (candidate / META_DIR).is_dir() and not is_examples(candidate))


def find_examples(start: Path | None = None) -> Path | None:
    """The folder of shipped examples nearest to ``start`` (default: the current folder), itself or above."""
    return _nearest(start, is_examples)


def _nearest(start: Path | None, wanted: Callable[[Path], bool]) -> Path | None:
    here = Path.cwd()
    origin = (here / start).resolve() if start is not None else here
    for folder in (origin, *origin.parents):
        for candidate in (folder, folder / DEFAULT_DIR, folder / LEGACY_DIR):
            if wanted(candidate):
                return Path(os.path.relpath(candidate, here))
    return None


def default_workspace(start: Path | None = None) -> Path:
    """Where a new workspace goes: ``practice/`` beside the nearest shipped examples (a clone's root, even from
    inside ``broken/``), else in ``start`` (default: the current folder)."""
    examples = find_examples(start)
    if examples is None:
        return (start or Path()) / DEFAULT_DIR
    return Path(os.path.normpath(examples / os.pardir / DEFAULT_DIR))  # from inside broken/: ../practice


def start_workspace(folder: Path) -> bool:
    """Make ``folder`` a workspace (its ``.kata/``); False when it already was one. A folder of examples, or a
    file in the way, is a clear error."""
    if is_examples(folder):
        raise KataError(f"{folder} holds the shipped examples; your own katas go in a workspace of their own "
                        f"(the default: {default_workspace(folder)}/)")
    if folder.exists() and not folder.is_dir():
        raise KataError(f"{folder} is a file, not a folder")
    if (folder / META_DIR).is_dir():
        return False
    (folder / META_DIR).mkdir(parents=True)
    return True


def metadata_path(script: Path) -> Path:
    return script.parent / META_DIR / f"{script.stem}.json"


def read_metadata(script: Path) -> KataInfo | None:
    """The kata's metadata, format 1 (base64; planted in plain text) or 2 (sealed); None if none can be read."""
    try:
        doc = json.loads(metadata_path(script).read_text())
        if doc["format"] == 1:
            fields = json.loads(base64.b64decode(doc["kata"]))
            return KataInfo(**{**fields, "baseline": tuple(fields.get("baseline", ()))}, plain=True)
        if doc["format"] == FORMAT:
            nonce = bytes.fromhex(doc["nonce"])
            sealed = json.loads(_xor(base64.b64decode(doc["sealed"]), nonce))
            return KataInfo(doc["engine"], sealed["bug"], sealed["site"], doc["reference"], doc["seed"], doc["plain"],
                            doc.get("nproc", 1), tuple(doc.get("baseline", ())), doc.get("observed"),
                            doc.get("guessed", False))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def write_metadata(script: Path, info: KataInfo) -> None:
    """Seal bug and site with a nonce taken from the kata's text: different for each kata, and the same
    whenever the same kata is written again, so that `kata new` stays reproducible byte for byte."""
    nonce = hashlib.sha256(b"nonce\0" + script.read_bytes()).digest()[:16]
    fields = asdict(info)
    sealed = _xor(json.dumps({k: fields.pop(k) for k in SEALED}, sort_keys=True).encode(), nonce)
    doc = {"format": FORMAT, **fields, "nonce": nonce.hex(), "sealed": base64.b64encode(sealed).decode()}
    write_text_atomically(metadata_path(script), json.dumps(doc, indent=2) + "\n")


def _xor(data: bytes, nonce: bytes) -> bytes:
    """Seals and unseals alike."""
    return bytes(a ^ b for a, b in zip(data, hashlib.shake_256(SEAL + nonce).digest(len(data))))


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


def replace_with_backup(target: Path, text: str, keep_in: Path | None = None) -> Path | None:
    """Overwrite ``target`` (``--force``), keeping the previous version in ``.kata/backup/`` beside it, or in
    ``keep_in`` (a shipped example's: in the workspace, never in the examples' folder)."""
    backup = None
    if target.exists():
        folder = keep_in or target.parent / META_DIR / "backup"
        folder.mkdir(parents=True, exist_ok=True)
        n = len(list(folder.glob(f"{target.stem}.*.py"))) + 1
        backup = folder / f"{target.stem}.{n}.py"
        backup.write_bytes(target.read_bytes())
    write_text_atomically(target, text)
    return backup
