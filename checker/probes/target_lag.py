"""target-lag: a copy of the trained network that runs at every update lags behind it.

A target network (DQN, DDPG), a mean teacher or an EMA model is a second module of the trained network's own
architecture whose weights follow the trained ones at a distance: synced every few hundred updates, or averaged.
Its point is the lag: the TD targets stay put while the online network chases them. A copy synced at every
update (the sync's condition lost), or one whose weights share the trained weights' storage
(``p.detach()`` without ``.clone()``), holds the trained weights themselves whenever it runs: the script keeps a
second network that does nothing, and the targets move with every step.

Rule: a copy is a module called at top level whose parameters no optimizer was given, with the same parameter
shapes, in the same order, as a module whose parameters an optimizer trains (the copies of one shape are judged
together: one kept, or a fresh one per update). In each stretch from one optimizer update to the next, the first
call of a copy compares a fixed sample of up to 64 elements of each of its parameters
with the same elements of each trained module of that shape:

* fail: the copy ran in at least 90 % of the stretches since its first call, over at least 20 updates, and held
  exactly the trained module's current weights in at least 90 % of them: it never lags;
* pass: the copy ran that often and lagged (its weights differed) in more than 10 % of them;
* not applicable: no such copy ran, or it ran in fewer stretches than that (an evaluation copy, a policy that
  acts between rounds of updates, like PPO's old policy: its premise is not a per-update target).

Measured: the ``rl`` reference syncs its target network every 50 updates: it holds the trained weights at 1 in
50 of its calls; synced at every update, or aliased, at all of them. Why a correct script cannot fail: a copy that
lags holds other values, and a copy that does not run at every update is not judged; a frozen copy (a reference
model, a fixed random target) lags ever more. Limits: a copy called inside another module's forward, or through
``torch.func.functional_call``, is not seen; a copy of part of a network (the target of one head) is seen only
when it is a module of that part's parameters called at top level. Cost: at each top-level call of a module,
one lookup; for a copy, at most one comparison of 64 elements per parameter per update.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.fast_weights import OWNER, TrainedParams

ID = "target-lag"
TITLE = "a per-update copy of the trained network lags behind it"
SYMPTOM_ID, SYMPTOM = "copy-weights", "what a second copy of the trained network holds when it runs"
SAMPLE = 64  # elements of each parameter compared
EVERY_UPDATE = 0.9  # a copy that runs in this share of the stretches between updates is a per-update target ...
MIN_UPDATES = 20  # ... over at least this many updates
NEVER_LAGS = 0.9  # ... and fails when it holds the trained weights in this share of them
USES = (OWNER,)


@dataclass
class Copy:
    name: str  # its class name
    shapes: str  # its parameters' shapes, for the report
    first: int  # the updates made before its first call
    stretches: int = 0  # stretches between updates it ran in
    equal: int = 0  # ... holding exactly a trained module's weights
    shared: bool = False  # its weights are the trained weights' own storage


@dataclass
class Observation:
    updates: int = 0
    copies: list[Copy] = field(default_factory=list)

    def __post_init__(self) -> None:  # read back from JSON
        self.copies = [Copy(**c) if isinstance(c, dict) else c for c in self.copies]


class Observer:
    def __init__(self, session):
        import weakref

        self.obs = Observation()
        self.ref = weakref.ref
        self.trained = session.shared(TrainedParams)
        self.modules: dict[int, tuple] = {}  # module serial -> (parameter references, shapes)
        self.trained_modules: dict[tuple, list[int]] = {}  # shapes -> serials of modules with trained parameters
        self.copies: dict[tuple, Copy] = {}  # shapes -> the record of the copies of those shapes (one, or a fresh one
        # per update)
        self.last: dict[tuple, int] = {}  # shapes -> the update count at the last comparison
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_POST, ID, self.on_update)

    def on_update(self, update) -> None:
        if not update.manual:
            self.obs.updates += 1

    def on_forward(self, forward) -> None:
        if not self.trained.params:
            return
        known = self.modules.get(forward.module)
        if known is None:
            module = forward.ref()
            if module is None:
                return
            params = list(module.parameters())
            if not params:
                self.modules[forward.module] = ((), ())
                return
            known = self.modules[forward.module] = (tuple(self.ref(p) for p in params),
                                                     tuple(tuple(p.shape) for p in params))
            if all(p in self.trained for p in params):
                self.trained_modules.setdefault(known[1], []).append(forward.module)
        refs, shapes = known
        if not refs or forward.module in self.trained_modules.get(shapes, ()) or shapes not in self.trained_modules:
            return
        if self.last.get(shapes) == self.obs.updates:
            return  # a copy of these shapes was compared already in this stretch
        params = [r() for r in refs]
        if any(p is None or p in self.trained for p in params):
            return
        self.last[shapes] = self.obs.updates
        record = self.copies.get(shapes)
        if record is None:
            record = self.copies[shapes] = Copy(forward.name, describe(shapes), self.obs.updates)
            self.obs.copies.append(record)
        record.stretches += 1
        for serial in self.trained_modules[shapes]:
            trained = [r() for r in self.modules[serial][0]]
            if any(p is None for p in trained):
                continue
            if same_storage(params, trained):
                record.shared = True
            if equal(params, trained):
                record.equal += 1
                break

    def summary(self) -> Observation:
        return self.obs


def describe(shapes: tuple) -> str:
    return f"{len(shapes)} tensors, the first {'x'.join(map(str, shapes[0])) or 'scalar'}"


def equal(copy: list, trained: list) -> bool:
    import torch

    with torch.no_grad():
        for a, b in zip(copy, trained):
            if a.layout != torch.strided or b.layout != torch.strided or a.device != b.device:
                return False
            if a.numel() == 0:
                continue
            index = torch.linspace(0, a.numel() - 1, min(SAMPLE, a.numel()), device=a.device).round().long()
            if not torch.equal(a.detach().reshape(-1)[index], b.detach().reshape(-1)[index]):
                return False
    return True


def same_storage(copy: list, trained: list) -> bool:
    try:
        return all(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
                   for a, b in zip(copy, trained))
    except (RuntimeError, NotImplementedError):  # a tensor kind without storage
        return False


def judge(obs: Observation, facts: RunFacts) -> Finding:
    judged = [c for c in obs.copies if obs.updates - c.first >= MIN_UPDATES
              and c.stretches >= EVERY_UPDATE * (obs.updates - c.first)]
    if not judged:
        if obs.copies:
            c = obs.copies[0]
            why = (f"a copy of the trained network ({c.name}) ran in {c.stretches} of the {obs.updates - c.first} "
                   f"stretches between updates after its first call: not a target that runs at every update "
                   f"(fewer than {EVERY_UPDATE:.0%} of at least {MIN_UPDATES})")
        else:
            why = "no module of the trained network's shapes, with parameters no optimizer trains, ran"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    worst = max(judged, key=lambda c: c.equal / c.stretches)
    measured = f"{worst.equal} of {worst.stretches} updates"
    if worst.equal >= NEVER_LAGS * worst.stretches:
        how = ("its weights are the trained weights' own storage (a detached view, not a clone)" if worst.shared
               else "it was made equal to the trained network after every update")
        return Finding(ID, TITLE, FAIL, measured, f"< {1 - NEVER_LAGS:.0%} of updates",
                       f"the copy of the trained network ({worst.name}, {worst.shapes}) that runs at every update held "
                       f"exactly the trained weights at {worst.equal} of its {worst.stretches} updates: {how}. "
                       "A target network or an averaged copy is kept to lag behind the trained one; one that "
                       "never lags makes its targets move with every step. Sync it every N updates, or copy the "
                       "weights (load_state_dict, p.detach().clone())",
                       observed=f"a second copy of the trained network, run at every update, held exactly the "
                                f"trained network's current weights at {worst.equal} of {worst.stretches} updates")
    text = (f"the copy of the trained network ({worst.name}) that runs at every update held the trained weights at "
            f"{worst.equal} of its {worst.stretches} updates and other weights at the rest")
    return Finding(ID, TITLE, PASS, measured, f"< {1 - NEVER_LAGS:.0%} of updates", text, observed=text)
