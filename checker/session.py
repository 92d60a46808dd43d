"""The observed run, as the probes see it: the event bus (:mod:`checker.bus`), the timeline of passes, forwards
and phases (:mod:`checker.timeline`) and the update ledger (:mod:`checker.ledger`), with what the run is and
where its record goes. Observers subscribe to events and read the rest; they never write it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from checker.facts import PassFacts, RunFacts
from checker.ledger import UpdateLedger
from checker.params import total_norm
from checker.patches import Patches
from checker.timeline import EVAL


@dataclass
class Session(UpdateLedger):
    channel_dir: str = ""
    script_globals: dict[str, Any] = field(default_factory=dict)  # the finished script's globals, for naming
    rank: int | None = None  # in a process group: this process's rank, and the group's size
    world: int = 1
    patches: Patches = field(init=False)  # every patch and hook of the checker's, for the tamper check

    def __post_init__(self) -> None:
        self.patches = Patches(self.errors)

    def summary(self, tampered: list[str]) -> RunFacts:
        params = self.trained_params()
        phases = [self.phase(f) for f in self.forwards]
        return RunFacts(
            passes=[PassFacts(p.loader, self.role(p.index), p.batches, p.updates, p.nulls) for p in self.passes],
            updates=self.updates,
            manual_updates=self.manual_updates,
            scaler_skips=self.scaler_skips,
            backwards=self.backwards,
            null_backwards=self.null_backwards,
            backwards_before_first_update=self.backwards_before_first_update,
            usual_gap=self.usual_gap(),
            losses=self.losses,
            loss_forwards=self.reached_per_loss(),
            loss_groups=self.loss_groups,
            optimizers=sum(1 for opt in self.optimizers if id(opt) in self._updaters),
            # optimizers that take turns, each on its own backward pass, on models that one backward pass couples or
            # one feeds the other (a GAN's two players, the idle one frozen), not one backward pass applied by the
            # optimizers of an encoder and a decoder
            adversarial=self._alternations >= 2 and self._joint_steps < self._alternations
            and (self._coupled or self._fed_across_optimizers()) and self._disjoint_optimizers(),
            policy_gradient=self.policy_gradient(),
            trained_params=len(params),
            params_finite=all(math.isfinite(total_norm([p])) for p in params),
            eval_forwards=phases.count(EVAL),
            observer_errors=self.errors,
            tampered=tampered,
            rank=self.rank,
            world=self.world,
            stopped=self.stopped_in_pass(),
            profile=self.clock.summary(self.training_loaders()) if self.clock is not None else None,
        )
