"""The folder a script runs in: a scratch folder that looks like the one `kata check` was run from.

``python train.py --config configs/small.yaml`` reads ``configs/small.yaml`` from the folder it is run in, so the
scratch folder holds a link to every entry of that folder (:func:`populate`). Nothing the script writes may reach
those files: before a write goes through a link (an open for writing, ``mkdir``, ``remove``, ``rename``,
``rmtree``, ``chmod``, ``chdir`` into a linked folder, and ``torch.save``, whose file C++ opens), the checked process
turns the link into the scratch folder's own copy (:func:`protect`, an audit hook): a linked folder becomes a real
one whose entries are links, a linked file written from its start is unlinked (the write makes it anew), one
appended to or updated in place is copied first. The script then reads back what it wrote, and the user's folder
is left as it was. Writes no Python audit event announces (a C extension opening a path itself) are not covered;
a path given as absolute, or relative to a ``dir_fd``, is the script's own choice, as in a run without `kata`.
"""
from __future__ import annotations

import os
import shutil
import sys
from enum import Enum

SAVE_EVENT = "kata.torch.save"  # raised by the instrumentation's torch.save with the file it is about to write
# A checked process starts in the checker's own folder, so that nothing of the user's folder shadows the checker's
# modules (a `checker.py` of theirs); it moves to the scratch folder named here just before the script runs.
SCRATCH_VARIABLE = "KATA_SCRATCH"


class Last(Enum):
    """What a write does to the path's last component when it is a link into the user's folder."""

    KEEP = "keep"  # only the folders on the way are made real (removing or renaming the link itself is harmless)
    FOLDER = "folder"  # a linked folder becomes a real one (chdir, rmdir, rmtree)
    FRESH = "fresh"  # a linked file is unlinked: the write truncates it, or replaces it whole
    COPY = "copy"  # a linked file is copied: the write keeps some of its content (append, r+, chmod)


def populate(scratch: str, source: str) -> None:
    """Link every entry of ``source`` into ``scratch`` (an empty folder)."""
    try:
        entries = list(os.scandir(source))
    except OSError:
        return
    for entry in entries:
        try:
            os.symlink(entry.path, os.path.join(scratch, entry.name))
        except OSError:
            continue


class Mirror:
    def __init__(self, root: str):
        self.root = root
        self.prefix = root.rstrip(os.sep) + os.sep
        self.busy = False  # the hook's own file operations raise audit events too

    def linked(self, path: str) -> str | None:
        """Where ``path`` links into the user's folder: a link this module made (its target lies outside)."""
        if not os.path.islink(path):
            return None
        target = os.readlink(path)
        return target if os.path.isabs(target) and not target.startswith(self.prefix) else None

    def before_write(self, path, last: Last) -> None:
        if isinstance(path, int):
            return
        try:
            path = os.fsdecode(os.fspath(path))
        except TypeError:
            return
        full = os.path.abspath(path)
        if not full.startswith(self.prefix):
            return
        parts = full[len(self.prefix):].split(os.sep)
        current = self.root
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            target = self.linked(current)
            if target is None:
                continue
            final = i == len(parts) - 1
            if os.path.isdir(target):
                if not final or last in (Last.FOLDER, Last.COPY):
                    self.expand(current, target)
            elif final and last is Last.FRESH:
                os.unlink(current)
            elif final and last is Last.COPY:
                self.copy(current, target)

    @staticmethod
    def expand(link: str, target: str) -> None:
        """A linked folder made real, each of its entries a link."""
        entries = list(os.scandir(target))
        os.unlink(link)
        os.mkdir(link)
        for entry in entries:
            os.symlink(entry.path, os.path.join(link, entry.name))

    @staticmethod
    def copy(link: str, target: str) -> None:
        temporary = f"{link}.kata-copy"
        shutil.copy2(target, temporary)
        os.replace(temporary, link)

    def hook(self, event: str, args: tuple) -> None:
        last = WRITES.get(event)
        if last is None or self.busy:
            return
        self.busy = True
        try:
            if event == "open":
                path, _, flags = args
                if not flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT):
                    return
                last = Last.FRESH if flags & os.O_TRUNC else Last.KEEP if flags & os.O_EXCL else Last.COPY
                self.before_write(path, last)
            elif event == "os.rename":
                self.before_write(args[0], Last.KEEP)
                self.before_write(args[1], Last.FRESH)
            elif event in ("os.link", "os.symlink"):
                self.before_write(args[1], Last.KEEP)
            else:
                self.before_write(args[0], last)
        except (OSError, ValueError):
            pass  # the script's own call then fails, or succeeds, as it would have
        finally:
            self.busy = False


WRITES = {"open": Last.KEEP, "os.mkdir": Last.KEEP, "os.remove": Last.KEEP, "os.rename": Last.KEEP,
          "os.rmdir": Last.FOLDER, "shutil.rmtree": Last.FOLDER, "os.chdir": Last.FOLDER, "os.chmod": Last.COPY,
          "os.utime": Last.COPY, "os.truncate": Last.COPY, "os.link": Last.KEEP, "os.symlink": Last.KEEP,
          SAVE_EVENT: Last.FRESH}


def enter() -> None:
    """In the checked process, just before the script runs: move to the scratch folder (when started elsewhere), and
    protect what it mirrors."""
    scratch = os.environ.pop(SCRATCH_VARIABLE, None)
    if scratch:
        os.chdir(scratch)
    protect(os.getcwd())


def protect(root: str) -> None:
    """In the checked process, running in ``root``: turn links into copies before anything writes through them."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    mirror = Mirror(root)
    if any(mirror.linked(os.path.join(root, name)) for name in names):
        sys.addaudithook(mirror.hook)
