"""worker-rng: every DataLoader worker, in every epoch, draws its own augmentation stream.

Rule: each generator a training loader's workers draw from (the dataset's own
``torch.Generator``, ``random.Random`` or NumPy generator, and the process-wide
ones; generators held by transforms, containers and closures the dataset reaches
too) is fingerprinted in each worker after its ``worker_init_fn``; the starting
state is reported the first time a batch changes it, with the state that batch
left. Two equal starting states that the first batch leaves equal too (two
workers, or two epochs) mean a replayed stream; a dataset that reseeds its own
generator in its first ``__getitem__`` (from the worker's seed) starts alike but
draws apart, and passes. PyTorch re-seeds only the
process-wide generators, never a generator object the dataset owns. Loading
in the main process (``num_workers=0``) cannot show the problem: the probe cannot
tell, which is not a pass. A constant seed and a seed from the worker id alone
(repeats every epoch) fail.
Not applicable when loading draws no random numbers.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "worker-rng"
TITLE = "distinct augmentation per worker"
SYMPTOM_ID, SYMPTOM = "augmentation-streams", "random draws across workers"
MIN_WORKERS = 2


@dataclass
class Observation:
    reports: list[dict] = field(default_factory=list)  # one per generator start, see checker.workers


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        from checker.workers import read_reports

        train = self.session.training_loaders()
        return Observation([r for r in read_reports(self.session.channel_dir) if r["loader"] in train])


def judge(obs: Observation, facts: RunFacts) -> Finding:
    reports = obs.reports
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        return Finding(ID, TITLE, ERROR, message=f"the checker could not fingerprint generators: {errors[0]}")
    if not reports:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="loading training data drew no random numbers")
    main = [r for r in reports if r["workers"] == 0]
    reports = [r for r in reports if r["workers"]]
    if not reports:
        return Finding(ID, TITLE, CANNOT_TELL, "0 workers", f"≥ {MIN_WORKERS} workers",
                       f"random augmentation ({main[0]['generator']}) was drawn in the main process (num_workers=0), "
                       "where no worker can replay another's stream: load with workers to check")
    streams: dict[tuple, list[tuple]] = defaultdict(list)
    for r in reports:  # a stream is where it starts and where its first batch leaves it
        streams[r["loader"], r["generator"]].append((r["start"], r.get("after")))
    replayed = sum(len(starts) - len(set(starts)) for starts in streams.values())
    measured, threshold = f"{replayed} of {len(reports)} repeated", "0"
    if replayed:
        names = ", ".join(sorted({g for (_, g), starts in streams.items() if len(starts) > len(set(starts))}))
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{replayed} of {len(reports)} worker starts replayed an augmentation stream that another "
                       f"worker or epoch had already drawn ({names})",
                       observed=f"{replayed} of {len(reports)} data workers drew the same random augmentation as "
                                f"another worker or an earlier epoch ({names})")
    return Finding(ID, TITLE, PASS, measured, threshold,
                   f"all {len(reports)} worker starts drew distinct augmentation streams",
                   observed=f"all {len(reports)} data workers drew different random augmentations")
