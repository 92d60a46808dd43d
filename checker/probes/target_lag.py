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
* fail, first: the trained module was set to a copy's weights (loaded with ``load_state_dict``, the weights it
  held after the load equal, in the sample, a copy's of its shapes that ran; or found holding them when the copy
  ran, its own weights having moved since and the copy's not: ``p.copy_(t)`` by hand) at least 3 times, each after
  updates putting back exactly the weights the previous one did: the copy never moved in the whole run, and every update in
  between was thrown away (a sync written backwards: ``online.load_state_dict(target.state_dict())``), whether or
  not the copy runs at every update. A copy that moves at some point (a federated round's global model, loaded into
  one local model per client, the same weights within a round) is not judged so;
* not applicable: no such copy ran, or it ran in fewer stretches than that (an evaluation copy, a policy that
  acts between rounds of updates, like PPO's old policy: its premise is not a per-update target). A stretch in which
  the trained weights did not move since the last comparison is not counted: a copy cannot lag behind weights that
  stand still (steps that find the gradients reset apply nothing; weights-update says so).

Measured: the ``rl`` reference syncs its target network every 50 updates: it holds the trained weights at 16 of
its 769 updates; synced at every update, or aliased, at all of them; with the sync written backwards, the online
network is reset to the unchanged target 15 times and 700 of its updates are discarded. Why a correct script cannot fail: a copy that
lags holds other values, and a copy that does not run at every update is not judged; a frozen copy (a reference
model, a fixed random target) lags ever more. Loading the trained network from a copy that moves (Lookahead's slow
weights, an EMA swapped in) puts back other weights each time; a reset to weights kept as a dict (a fold of a
cross-validation, a lottery ticket's rewind), or one restore at the end of the run, is not a reset to a copy. Limits: a copy called inside another module's forward (BYOL's and MoCo's
momentum encoders), or through ``torch.func.functional_call``, is not seen; nor is a copy of a network whose
parameters an optimizer trained earlier in the run (a teacher trained first); a copy of part of a network is seen
only when it is a module of that part's parameters called at top level; a Polyak average with a rate near 1 lags
by too little to matter yet differs, and passes. Cost: at each top-level call of a module,
one lookup; for a copy, at most one comparison of 64 elements per parameter per update.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.copies import EVERY_UPDATE, MIN_UPDATES, OWNER, Copies, Copy, per_update

ID = "target-lag"
TITLE = "a per-update copy of the trained network lags behind it"
SYMPTOM_ID, SYMPTOM = "copy-weights", "what a second copy of the trained network holds when it runs"
NEVER_LAGS = 0.9  # a per-update copy fails when it holds the trained weights in this share of its updates
MIN_RESETS = 2  # loads of the trained network that put back its copy's unchanged weights, discarding the updates
USES = (OWNER,)


@dataclass
class Observation:
    copies: list[Copy] = field(default_factory=list)

    def __post_init__(self) -> None:  # read back from JSON
        self.copies = [Copy(**c) if isinstance(c, dict) else c for c in self.copies]


class Observer:
    def __init__(self, session):
        self.copies = session.shared(Copies)

    def summary(self) -> Observation:
        return Observation(self.copies.copies())


def judge(obs: Observation, facts: RunFacts) -> Finding:
    reset = [c for c in obs.copies if c.resets >= MIN_RESETS and not c.moved]
    if reset:
        c = max(reset, key=lambda c: c.discarded)
        loads = c.resets + 1
        return Finding(ID, TITLE, FAIL, f"{c.discarded} updates discarded", "0",
                       f"the trained network was loaded with the weights of its copy ({c.name}, {c.shapes}) "
                       f"{loads} times, and each load put back exactly the weights the one before had: the copy "
                       f"never moved, and the {c.discarded} updates made between the loads were thrown away. A "
                       "target network or an averaged copy follows the trained network (target.load_state_dict("
                       "online.state_dict())); the trained network is not reset to it",
                       observed=f"the trained network was reset {loads} times to the same weights, those of a copy "
                                f"of it that never moved, discarding the {c.discarded} updates made in between")
    judged = [c for c in obs.copies if per_update(c)]
    if not judged:
        if obs.copies:
            c = obs.copies[0]
            why = (f"a copy of the trained network ({c.name}) ran in {c.stretches} of the {c.updates - c.first} "
                   f"stretches between its network's updates after its first call: not a target that runs at every "
                   f"update (fewer than {EVERY_UPDATE:.0%} of at least {MIN_UPDATES})")
        else:
            why = "no module of the trained network's shapes, with parameters no optimizer trains, ran"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    worst = max(judged, key=lambda c: c.equal / c.stretches)
    measured = f"{worst.equal} of {worst.stretches} updates"
    if worst.equal >= NEVER_LAGS * worst.stretches:
        how = ("its weights are the trained weights' own storage (a detached view or a shallow copy, not a clone)"
               if worst.shared else "it was made equal to the trained network after every update")
        return Finding(ID, TITLE, FAIL, measured, f"< {1 - NEVER_LAGS:.0%} of updates",
                       f"the copy of the trained network ({worst.name}, {worst.shapes}) that runs at every update held "
                       f"exactly the trained weights at {worst.equal} of its {worst.stretches} updates: {how}. "
                       "A target network or an averaged copy is kept to lag behind the trained one; one that "
                       "never lags makes its targets move with every step. Sync it every N updates, or copy the "
                       "weights (load_state_dict, copy.deepcopy, p.detach().clone())",
                       observed=f"a second copy of the trained network, run at every update, held exactly the "
                                f"trained network's current weights at {worst.equal} of {worst.stretches} updates")
    text = (f"the copy of the trained network ({worst.name}) that runs at every update held the trained weights at "
            f"{worst.equal} of its {worst.stretches} updates and other weights at the rest")
    return Finding(ID, TITLE, PASS, measured, f"< {1 - NEVER_LAGS:.0%} of updates", text, observed=text)
