"""rank-streams: in data-parallel training, ranks that train on different data draw different random numbers.

Augmentation and dropout draw from random streams. Seeded with the same number on
every rank (``manual_seed(seed)`` where ``seed + rank`` was meant), every rank draws
the same noise, crops and dropout masks at the same step: the ranks' samples
differ but their randomness is copied, so the job explores N times less of it than
it seems to, and the copies are correlated in every averaged gradient.

Observed. In each rank, the state of each random stream after each update (every
update of the first 64, then every 16th), as a digest: the default CPU generator,
the current CUDA device's generator when CUDA is in use, and every
``torch.Generator`` the script's own code creates (in a rank, the instrumentation
replaces ``torch.Generator`` by a subclass that tells where each instance was made,
GENERATOR events; ``isinstance`` checks keep working), with the number of DataLoader passes begun
so far. A stream is *drawn during training* when its state changed between two
recorded updates with no DataLoader pass begun between them: a DataLoader draws
its workers' base seed (and a shuffling sampler its seed) from the default
generator as each pass begins, on every rank alike when the ranks are seeded
alike, and that draw alone is not the script's randomness. Also kept: a digest of
each training DataLoader pass's index order.

Rule. A stream drawn during training on some rank, present on every rank, is
*shared* when its states are equal on all ranks after every compared update. The
probe fails when a stream is shared and the ranks' training data differ (their
passes drew different index orders); it cannot tell when a stream is shared and
no DataLoader showed whether the data differ; it passes when every stream drawn
during training differs across ranks; n/a when none was drawn during training.

Why a correct script does not fail. Seeding with ``seed + rank`` (nanoGPT's
``1337 + seed_offset``), or not seeding at all, gives every rank its own streams;
a generator used only before training (to make a dataset) is not drawn during
training, and neither is the default generator when only the DataLoader's pass
starts draw from it. Not caught: Python's ``random`` and NumPy's streams, and the
workers' streams, whose seeds the shared base seed makes equal across ranks when
a loader has workers (not observed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.distributed import launched, sampled
from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "rank-streams"
TITLE = "each rank its own random numbers"
SYMPTOM_ID, SYMPTOM = "rank-randomness", "the random numbers each rank draws"
DEFAULT, CUDA = "the default generator", "the CUDA generator"


@dataclass
class Observation:
    states: list[list] = field(default_factory=list)  # [update ordinal, {stream: digest}, DataLoader passes begun]
    orders: list[int] = field(default_factory=list)  # digests of the training passes' index orders


class Observer:
    def __init__(self, session):
        self.session, self.obs, self.updates = session, Observation(), 0
        self.generators: list = []  # (where it was made, weak reference)
        self.counts: dict[str, int] = {}  # generators made at each line
        if launched():
            session.on(Event.GENERATOR, ID, self.on_generator)
            session.on(Event.UPDATE_POST, ID, self.on_update)

    def on_generator(self, generator, where: str) -> None:
        import weakref

        self.counts[where] = self.counts.get(where, 0) + 1
        self.generators.append((f"the torch.Generator made at {where} (#{self.counts[where]})", weakref.ref(generator)))

    def on_update(self, update) -> None:
        self.updates += 1
        if not sampled(self.updates):
            return
        import torch

        states = {DEFAULT: digest(torch.default_generator.get_state())}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states[CUDA] = digest(torch.cuda.get_rng_state())
        for where, ref in self.generators:
            generator = ref()
            if generator is not None and generator.device.type == "cpu":
                states[where] = digest(generator.get_state())
        self.obs.states.append([self.updates, states, len(self.session.passes)])

    def summary(self) -> Observation:
        train = self.session.training_loaders()
        self.obs.orders = [p.order.digest for p in self.session.passes
                           if p.loader in train and p.order is not None and p.order.indices]
        return self.obs


def digest(state) -> str:
    import hashlib

    return hashlib.blake2b(state.numpy().tobytes(), digest_size=8).hexdigest()


def drawn(obs: Observation, stream: str) -> bool:
    """Whether the stream's state changed between two recorded updates of one DataLoader pass (or of no pass)."""
    rows = [(states[stream], passes) for _, states, passes in obs.states if stream in states]
    return any(passes == later_passes and state != later
               for (state, passes), (later, later_passes) in zip(rows, rows[1:]))


def judge(obs: Observation, facts: RunFacts) -> Finding:
    return Finding(ID, TITLE, NOT_APPLICABLE, message="one process: there are no ranks to compare")


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    by_rank = [{int(row[0]): row[1] for row in obs.states} for obs in observations]
    common = sorted(set.intersection(*(set(r) for r in by_rank)))
    streams = [s for s in dict.fromkeys(k for r in by_rank for states in r.values() for k in states)
               if all(any(s in r[o] for o in common) for r in by_rank) and any(drawn(obs, s) for obs in observations)]
    if not common or not streams:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no random stream was drawn from during training")
    shared = [s for s in streams
              if all(len({r[o].get(s) for r in by_rank}) == 1 for o in common if all(s in r[o] for r in by_rank))]
    if not shared:
        text = f"each of the {len(streams)} random streams drawn during training differed across ranks"
        return Finding(ID, TITLE, PASS, f"0 of {len(streams)} streams shared", "0", text, observed=text)
    orders = [obs.orders for obs in observations]
    text = (f"{shared[0]} held the same state on all {len(observations)} ranks after each of {len(common)} updates: "
            "every rank drew the same random numbers")
    if not all(orders) or len({tuple(o) for o in orders}) == 1:
        why = (f"{text}, but the ranks also trained on the same samples in the same order (rank-shards judges that)"
               if all(orders) else f"{text}, but whether the ranks' data differ was not seen (no training DataLoader)")
        return Finding(ID, TITLE, CANNOT_TELL, f"{len(shared)} of {len(streams)} streams shared", "0", why)
    return Finding(ID, TITLE, FAIL, f"{len(shared)} of {len(streams)} streams shared", "0",
                   f"{text} while their data differ: the same noise and dropout masks on every rank. Seed each rank's "
                   "streams differently (seed + rank)", observed=text)
