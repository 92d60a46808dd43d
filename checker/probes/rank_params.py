"""rank-params: in data-parallel training, every rank's replica holds the same parameters after every update.

DistributedDataParallel averages the gradients of all ranks during backward, so
that each rank's optimizer applies the same update to the same weights. A forward
that bypasses the wrapper (``model.module(x)``), gradients computed outside it, or
a step on a rank's own gradients leave each replica to learn from its own shard
alone: the replicas drift apart while every rank's loss still falls.

Observed. In each rank, a checksum of the parameters the first optimizer step
updates, taken before that step, and a checksum of the parameters each update
changed, after it (every update of the first 64, then every 16th). A checksum is
the sum and the sum of squares, in float64, of up to the first 4096 elements of
each parameter: equal replicas give bitwise equal sums.

Rule. Only where every rank's parameters were equal before the first update (the
replicas of one model: DDP broadcasts rank 0's at construction): the probe fails
when, after some update, a rank's checksum differs from rank 0's (relative
difference above 1e-9), and passes when all agree after every compared update.

Why a correct script does not fail. DDP's all-reduce hands every rank the same
averaged gradient, and the optimizers then compute the same step: the checksums
agree bit for bit. Gradient accumulation under ``no_sync()`` syncs at the last
micro-batch, before the step. Not applicable: one process; a rank that made no
update; parameters that differed before the first update (each rank its own
model, or a sharded model such as FSDP, whose ranks hold different pieces).

Diagnosis. Several causes give the same drift, and the message names every one
the evidence admits: the gradients each rank applied (their checksum before the
same update) tell a step that differed, with equal gradients (the rank's own
optimizer settings or a hand edit of its weights), from gradients that were
never averaged; the training forwards that ran through the wrapper or around it,
on its ``.module``, and the parameters' dtype and device when the wrapper was
built and at the first update (moved or cast after wrapping) narrow the latter.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.distributed import launched, sampled
from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "rank-params"
TITLE = "replicas equal across ranks"
SYMPTOM_ID, SYMPTOM = "replica-drift", "each rank's copy of the weights after each update"
HEAD = 4096  # elements of each parameter summed
RTOL = 1e-9


@dataclass
class Observation:
    before: list[float] | None = None  # [sum, sum of squares] before the first update
    after: list[list[float]] = field(default_factory=list)  # [update ordinal, sum, sum of squares]
    updates: int = 0
    grads: list[list[float]] = field(default_factory=list)  # [update ordinal, sum, sum of squares] of the gradients
    through: int = 0  # training forwards of a DistributedDataParallel wrapper
    around: int = 0  # training forwards of a wrapped module called directly (its ``.module``)
    moved: list[str] = field(default_factory=list)  # "float32 on cpu to float64 on cpu": changed since wrapping


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self._wrappers: set[int] = set()  # the serial (``session.serial``) of each DistributedDataParallel wrapper
        self._wrapped: dict[int, list] = {}  # serial of a wrapped module -> its (parameter, dtype, device) when wrapped
        if launched():
            session.on(Event.ATTACHED, ID, self.on_attach)
            session.on(Event.FORWARD, ID, self.on_forward)
            session.on(Event.UPDATE_PRE, ID, self.on_update_pre)
            session.on(Event.UPDATE_POST, ID, self.on_update_post)

    def on_attach(self, parent, name: str, module) -> None:
        from torch.nn.parallel import DistributedDataParallel

        if isinstance(parent, DistributedDataParallel) and name == "module" and module is not None:
            self._wrappers.add(self.session.serial(parent))
            self._wrapped[self.session.serial(module)] = [(p, p.dtype, p.device) for p in module.parameters()]

    def on_forward(self, forward) -> None:
        if forward.grad:
            self.obs.through += forward.module in self._wrappers
            self.obs.around += forward.module in self._wrapped

    def on_update_pre(self, update) -> None:
        if self.obs.before is None:
            self.obs.before = checksum(update.params)
            self.obs.moved = sorted({f"{dtype} on {device} to {p.dtype} on {p.device}" for params in self._wrapped.values()
                                     for p, dtype, device in params if (p.dtype, p.device) != (dtype, device)})
        if sampled(self.obs.updates + 1):
            self.obs.grads.append([self.obs.updates + 1, *checksum([p.grad for p in update.params
                                                                    if p.grad is not None])])

    def on_update_post(self, update) -> None:
        self.obs.updates += 1
        if sampled(self.obs.updates):
            self.obs.after.append([self.obs.updates, *checksum(update.params)])

    def summary(self) -> Observation:
        return self.obs


def checksum(params: list) -> list[float]:
    import torch

    with torch.no_grad():
        heads = [p.detach().reshape(-1)[:HEAD] for p in params if p.numel()]
        if not heads:
            return [0.0, 0.0]
        flat = torch.cat([h.to(device="cpu", dtype=torch.float64) for h in heads])
        return [float(flat.sum()), float((flat * flat).sum())]


def differs(a: list[float], b: list[float]) -> bool:
    return any(abs(x - y) > RTOL * max(abs(x), abs(y), 1e-30) for x, y in zip(a, b))


def diagnosis(observations: list[Observation], rank: int, ordinal: int) -> str:
    """Every cause of the drift that the ranks' evidence admits, the narrowest first."""
    grads = [{int(row[0]): row[1:] for row in o.grads} for o in (observations[0], observations[rank])]
    compared = [u for u in sorted(grads[0]) if u <= ordinal and u in grads[1]]
    if compared and not any(differs(grads[0][u], grads[1][u]) for u in compared):
        return ("yet both ranks applied the same gradients up to that update, so their steps differed: an optimizer "
                "setting or learning rate that depends on the rank, or weights changed by hand on one rank only")
    moved = sorted({m for o in observations for m in o.moved})
    if moved:
        return (f"the gradients the ranks applied were not averaged. The wrapped model's parameters were moved or cast "
                f"after DistributedDataParallel was built over them ({'; '.join(moved)}): its gradient synchronisation "
                f"was set up for the parameters as they were. Move or cast the model first, then wrap it")
    if all(o.around and not o.through for o in observations):
        return ("the gradients the ranks applied were not averaged: every training forward called the wrapped module "
                "itself (.module), around the DistributedDataParallel wrapper, whose forward is what arranges the "
                "all-reduce. Call the wrapper")
    causes = ["a training forward around the wrapper (its .module)" if any(o.around for o in observations) else None,
              "gradients accumulated under no_sync() and stepped before a synchronised backward",
              "a loss computed or gradients changed outside the wrapper's backward (a second model call, a rank's "
              "own edit of .grad after backward)",
              "parameters added to the model after it was wrapped"]
    return ("the gradients the ranks applied were not averaged, so each replica learns from its own shard. What leaves "
            f"them unaveraged: {'; '.join(c for c in causes if c)}")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    return Finding(ID, TITLE, NOT_APPLICABLE, message="one process: there are no ranks to compare")


def judge_ranks(observations: list[Observation], facts: list[RunFacts]) -> Finding:
    if any(o.before is None for o in observations):
        return Finding(ID, TITLE, NOT_APPLICABLE, message="a rank made no optimizer update: no replicas to compare")
    if any(differs(o.before, observations[0].before) for o in observations[1:]):
        why = ("the ranks' parameters already differed before the first update: each rank trains its own model, "
               "or holds a shard of it, so there are no replicas to compare")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why)
    reference = {int(row[0]): row[1:] for row in observations[0].after}
    compared = 0
    for rank, obs in enumerate(observations[1:], start=1):
        for ordinal, *sums in obs.after:
            if int(ordinal) not in reference:
                continue
            compared += 1
            if differs(sums, reference[int(ordinal)]):
                seen = (f"the ranks' weights were equal before the first update, but after update {int(ordinal)} "
                        f"rank {rank}'s differ from rank 0's (sum of squares {sums[1]:.6g} against "
                        f"{reference[int(ordinal)][1]:.6g})")
                return Finding(ID, TITLE, FAIL, f"differ after update {int(ordinal)}", "equal after every update",
                               f"{seen}: {diagnosis(observations, rank, int(ordinal))}", observed=seen)
    if not compared:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="the ranks made no updates that could be compared")
    updates = compared // (len(observations) - 1)
    seen = f"the {len(observations)} ranks' weights were equal after each of the {updates} updates compared"
    return Finding(ID, TITLE, PASS, "equal after every update", "equal after every update", seen, observed=seen)
