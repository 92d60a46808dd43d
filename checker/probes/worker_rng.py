"""worker-rng: every DataLoader worker, in every epoch, draws its own augmentation stream.

Rule: each generator a training loader's workers draw from (the dataset's own
``torch.Generator``, ``random.Random`` or NumPy generator, and the process-wide
ones) is fingerprinted in each worker after its ``worker_init_fn``; the starting
state is reported the first time a batch changes it. Two equal starting states
(two workers, or two epochs) mean a replayed stream. PyTorch re-seeds only the
process-wide generators, never a generator object the dataset owns. Loading with
fewer than two workers cannot show the problem, so it does not pass: ``num_workers=0``,
a constant seed and a seed from the worker id alone (repeats every epoch) all fail.
Not applicable when loading draws no random numbers.
"""
from __future__ import annotations

from collections import defaultdict

from checker.findings import ERROR, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "worker-rng"
TITLE = "distinct augmentation per worker"
MIN_WORKERS = 2


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> dict:
        from checker.workers import read_reports

        train = self.session.training_loaders()
        return {"reports": [r for r in read_reports(self.session.channel_dir) if r["loader"] in train]}


def judge(obs: dict, facts: dict) -> Finding:
    reports = obs["reports"]
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        return Finding(ID, TITLE, ERROR, message=f"the checker could not fingerprint generators: {errors[0]}")
    if not reports:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="loading training data drew no random numbers")
    few = [r for r in reports if r["workers"] < MIN_WORKERS]
    if few:
        where = "the main process" if few[0]["workers"] == 0 else "a single worker"
        return Finding(ID, TITLE, FAIL, f"{few[0]['workers']} workers", f"≥ {MIN_WORKERS} workers",
                       f"random augmentation ({few[0]['generator']}) was drawn in {where}, "
                       f"so parallel loading never ran")
    streams: dict[tuple, list[str]] = defaultdict(list)
    for r in reports:
        streams[r["loader"], r["generator"]].append(r["start"])
    replayed = sum(len(starts) - len(set(starts)) for starts in streams.values())
    measured, threshold = f"{replayed} of {len(reports)} repeated", "0"
    if replayed:
        names = ", ".join(sorted({g for (_, g), starts in streams.items() if len(starts) > len(set(starts))}))
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{replayed} of {len(reports)} worker starts replayed an augmentation stream that another "
                       f"worker or epoch had already drawn ({names})")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   f"all {len(reports)} worker starts drew distinct augmentation streams")
