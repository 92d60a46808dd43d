"""workers-respawn: a DataLoader iterated epoch after epoch keeps its worker processes.

A DataLoader with ``num_workers > 0`` starts that many processes each time it is iterated, unless it was built with
``persistent_workers=True``: then the first iteration starts them and every later one reuses them. Each start forks
(or spawns) the processes, copies the dataset into them and waits for their first batches: a pause at the top of
every epoch that grows with the workers, the dataset and the start method (``spawn`` re-imports everything), and
that a persistent loader pays once.

Observed. Each iteration of a DataLoader (a *pass*): whether it started worker processes (the loader has workers,
and is not persistent or has no live iterator yet: what ``DataLoader.__iter__`` itself decides), and, for the
report, the seconds from ``iter(loader)`` to its first batch, the seconds waited for each later batch, and the
seconds to its last batch. A pass's *start-up* is its wait for the first batch less its mean wait for a later one.

Rule (advice, never a failure: the training is the same, only slower). For each loader iterated at least twice
whose first pass started workers:

* advice: its workers were started anew at every later pass: "started 4 times, once expected" (a training loader is
  reported before an evaluation one, which restarts its workers at every evaluation just as well); the message adds
  the start-up measured here and its share of a pass (a timing, reported, never judged: it varies with the
  machine's load, and the same restarts cost seconds with ``spawn`` or a large dataset);
* pass: the workers were started once and kept (persistent), or started again only at some later passes, or every
  loader iterated twice loads in the main process (no workers to start);
* not applicable: no loader was iterated twice.

Measured (this 2-core CPU, fork): the ``classifier`` reference's training loader (two workers, 16 batches an epoch)
is persistent: its workers start once. Without ``persistent_workers=True`` they start at each of its 4 epochs,
about 20 to 60 ms each, 2 to 20 % of an epoch depending on the load. Why a correct script does not advise: a
persistent loader starts its workers once; a loader in the main process starts none. Limits: the advice is given
whatever the cost, which on a long epoch with fork is small; a loader whose iterator the script keeps by hand
across epochs (``itertools.cycle``, ``next(it)`` with a restart on ``StopIteration``) is judged by the iterations
it made. Cost: two clock reads per batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS, Finding

ID = "workers-respawn"
TITLE = "a DataLoader's workers are started once"
ADVISES = True  # a cost, not an error: advice at most, the check passes
SYMPTOM_ID, SYMPTOM = "worker-starts", "worker processes started per pass over the data"


@dataclass
class Loader:
    workers: int  # worker processes per start
    passes: int  # its iterations
    restarts: int  # later iterations that started workers again
    startup_s: float  # mean start-up of those iterations (seconds)
    span_s: float  # mean span of those iterations (seconds)
    training: bool = False  # a training loader (some update applied its batches' gradients)


@dataclass
class Observation:
    loaders: list[Loader] = field(default_factory=list)
    in_main: int = 0  # loaders iterated at least twice that load in the main process (no workers)

    def __post_init__(self) -> None:  # read back from JSON
        self.loaders = [Loader(**x) if isinstance(x, dict) else x for x in self.loaders]


class Observer:
    def __init__(self, session):
        self.session = session

    def summary(self) -> Observation:
        by_loader: dict[int, list] = {}
        for p in self.session.passes:
            if p.fetched:
                by_loader.setdefault(p.loader, []).append(p)
        loaders = []
        in_main = 0
        for passes in by_loader.values():
            if len(passes) >= 2 and not passes[0].workers:
                in_main += 1
            if len(passes) < 2 or not passes[0].workers:
                continue
            later = [p for p in passes[1:] if p.workers]
            startups = [max(p.start_s - p.wait_s / max(p.fetched - 1, 1), 0.0) for p in later]
            loaders.append(Loader(passes[0].workers, len(passes), len(later),
                                  sum(startups) / len(later) if later else 0.0,
                                  sum(p.span_s for p in later) / len(later) if later else 0.0,
                                  passes[0].loader in self.session.training_loaders()))
        return Observation(loaders, in_main)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.loaders:
        if obs.in_main:
            text = "every DataLoader iterated more than once loads in the main process: no worker processes to start"
            return Finding(ID, TITLE, PASS, "0 starts", "1 start", text, observed=text)
        why = "no DataLoader was iterated twice"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    worst = max(obs.loaders, key=lambda x: (x.restarts == x.passes - 1, x.training, x.restarts))
    which = "training" if worst.training else "evaluation"
    starts = worst.restarts + 1
    measured, threshold = f"{starts} start{'s' if starts > 1 else ''}", "1 start"
    if not worst.restarts:
        text = (f"the {which} DataLoader's {worst.workers} worker processes were started once and kept for its "
                f"{worst.passes} passes")
        return Finding(ID, TITLE, PASS, measured, threshold, text, observed=text)
    seen = (f"the {which} DataLoader started its {worst.workers} worker processes anew at {worst.restarts + 1} of its "
            f"{worst.passes} passes")
    share = worst.startup_s / worst.span_s if worst.span_s else 0.0
    cost = (f"here {worst.startup_s * 1e3:.0f} ms before each later pass's first batch, {share:.0%} of the pass "
            "(with spawn, or a dataset that is large to copy, seconds)")
    if worst.restarts == worst.passes - 1:
        return Finding(ID, TITLE, ADVICE, measured, threshold,
                       f"{seen}: {cost}. Without persistent_workers=True a DataLoader starts its workers at every "
                       "iteration (each epoch forks or spawns them and copies the dataset in); build it with "
                       "persistent_workers=True to start them once", observed=seen)
    return Finding(ID, TITLE, PASS, measured, threshold, f"{seen}, not at every pass: {cost}", observed=seen)
