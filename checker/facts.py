"""What the whole run did, as one typed record shared by the session (which writes it) and the judges.

No torch here: the ``kata`` process reads this record without importing it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


@dataclass
class PassFacts:
    loader: int
    role: str  # "train": a training loader's pass that trained (:meth:`checker.timeline.Timeline.role`); "eval" otherwise
    batches: int  # batches a forward ran on
    updates: int
    nulls: int = 0  # backward passes that were due no update: they gave parameters trained by hand only zeros


@dataclass
class RunFacts:
    passes: list[PassFacts] = field(default_factory=list)
    updates: int = 0  # optimizer steps and manual updates
    manual_updates: int = 0
    scaler_skips: int = 0  # GradScaler steps skipped for non-finite gradients (they count as updates due)
    backwards: int = 0
    null_backwards: int = 0  # backward passes due no update (only zero gradients, for parameters trained by hand)
    backwards_before_first_update: int | None = None
    usual_gap: int | None = None  # backward passes most updates followed
    losses: list[float | None] = field(default_factory=list)  # per backward; None: NaN or infinite
    loss_forwards: list[int] = field(default_factory=list)  # per loss: the forwards since the loss before it that a
    # backward pass reached (how many forwards it sums: 1 in most scripts, an episode's steps in a policy gradient)
    loss_groups: list[int] = field(default_factory=list)  # per loss, the updater that applied it (-1: none)
    optimizers: int = 0
    adversarial: bool = False  # optimizers take turns on disjoint parameters that one backward pass couples
    policy_gradient: bool = False  # actions sampled from distributions, and the log-probability of sampled values
    # (no gradient of their own) taken with gradients: a score-function objective
    trained_params: int = 0
    params_finite: bool = True
    eval_forwards: int = 0
    observer_errors: dict[str, str] = field(default_factory=dict)
    tampered: list[str] = field(default_factory=list)
    rank: int | None = None  # this process's rank in a process group, if it joined one
    world: int = 1  # the process group's size
    stopped: dict | None = None  # {"pass", "epoch", "batches", "of"}: training's last pass, left before its end
    prefix: int | None = None  # a prefix run (--steps, --epochs) stopped after this many updates: what is judged
    profile: dict | None = None  # a profiled run (--profile): seconds per phase up to the last update (checker.clock)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunFacts":
        data = dict(data)
        data["passes"] = [PassFacts(**p) for p in data.get("passes", [])]
        return cls(**data)

    @property
    def training_passes(self) -> list[PassFacts]:
        return [p for p in self.passes if p.role == "train"]

    @property
    def accumulation(self) -> int:
        """Backward passes per update (1 without accumulation): read off the first update, or off most updates where
        that is more (an accumulation window cut short at the start of each epoch, ``step % k == 0`` from step 0)."""
        return max(1, self.backwards_before_first_update or 1, self.usual_gap or 1)

    def skipped_updates(self) -> tuple[int, int]:
        """(training batches that ended without the update they were due, training batches).

        With DataLoaders a batch is what a training loader yielded; without them, a backward pass. A
        last, unfinished accumulation of k batches is allowed; a backward pass that gave only zero gradients to
        parameters trained by hand was due nothing.
        """
        k = self.accumulation
        passes = self.training_passes
        if passes:
            return (sum(max(0, (p.batches - p.nulls) // k - p.updates) * k for p in passes),
                    sum(p.batches for p in passes))
        due = (self.backwards - self.null_backwards) // k
        return max(0, due - 1 - self.updates - self.scaler_skips) * k, self.backwards


def finite(values: list) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]
