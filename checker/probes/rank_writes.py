"""rank-writes: in a distributed run, each file ``torch.save`` writes is written by one rank.

Every rank runs the same script, so a checkpoint saved without a rank guard is
written by all of them, to the same path, at about the same time: the copies race,
a reader may load a file another rank is still writing, and the work (and the disk
traffic) is multiplied by the number of ranks.

Observed. In each rank, every ``torch.save`` call (the instrumentation's SAVE
event) notes the file it wrote to: a path (absolute, from the rank's working
folder) or a file object's name; writes to a buffer (``io.BytesIO``) are not
files. The calls themselves are unchanged.

Rule. The probe fails when one path was written by two ranks or more, passes when
every path was written by one rank, and is not applicable when no rank saved to a
file.

Why a correct script does not fail. A save guarded by ``if rank == 0`` (or any
test of the rank), or a file per rank (``f"ckpt-{rank}.pt"``), gives each path one
writer. Not caught: files written with another function (``open``, ``np.save``,
``torch.distributed.checkpoint``, which writes one shard per rank by design).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from checker.distributed import launched
from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "rank-writes"
TITLE = "each file saved by one rank"
SYMPTOM_ID, SYMPTOM = "saved-files", "which ranks wrote each saved file"
MAX_PATHS = 50


@dataclass
class Observation:
    paths: dict[str, int] = field(default_factory=dict)  # file written -> torch.save calls that wrote it


class Observer:
    def __init__(self, session):
        self.obs = Observation()
        if launched():
            session.on(Event.SAVE, ID, self.on_save)

    def on_save(self, obj, f) -> None:
        paths = self.obs.paths
        target = f if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
        if isinstance(target, (str, os.PathLike)) and (len(paths) < MAX_PATHS or str(target) in paths):
            name = os.path.relpath(os.path.abspath(target))
            paths[name] = paths.get(name, 0) + 1

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    return Finding(ID, TITLE, NOT_APPLICABLE, message="one process: there are no ranks to compare")


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    writers: dict[str, list[int]] = {}
    for rank, obs in enumerate(observations):
        for path in obs.paths:
            writers.setdefault(path, []).append(rank)
    if not writers:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no rank saved to a file with torch.save")
    shared = {path: ranks for path, ranks in writers.items() if len(ranks) > 1}
    if shared:
        path, ranks = next(iter(shared.items()))
        text = f"{path} was written by {len(ranks)} ranks ({', '.join(map(str, ranks))})"
        if len(shared) > 1:
            text += f", and {len(shared) - 1} more file(s) likewise"
        return Finding(ID, TITLE, FAIL, f"{len(shared)} of {len(writers)} files", "0",
                       f"{text}: every rank saves the same file at about the same time, so the copies race. Save on "
                       "one rank (if rank == 0), and let the others wait at a barrier", observed=text)
    text = f"each of the {len(writers)} files saved was written by one rank"
    return Finding(ID, TITLE, PASS, f"0 of {len(writers)} files", "0", text, observed=text)
