"""Where an observed run's time goes, phase by phase (``kata check --profile``).

The hooks that see a phase begin and end (a top-level forward, a backward pass, an optimizer step, a DataLoader's
``__next__``, the checker's own handling of an event) enter and leave it here; every interval of wall time is given
to the innermost phase open during it, so the phases never overlap (a closure step's forward is forward time, not
the optimizer's; the checker's work inside a forward hook is the checker's). Time with no phase open is *other*:
the script's own work between them (slicing batches by hand, logging, host code). The profiled span runs from the
first phase entered to the end of the last update: what follows the last update (a final evaluation, saving) is not
part of any training step. On CUDA, each clock read first waits for the device (``torch.cuda.synchronize``) so that
a phase is charged with the GPU work it launched; this slows the run a little, and only a profiled run does it.

This module does not import torch.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Callable

FORWARD, EVALUATION, BACKWARD, OPTIMIZER, CHECKER, OTHER = \
    "forward", "evaluation", "backward", "optimizer", "checker", "other"
DATA = "data"  # the key of a loader's waits: (DATA, loader id)
POINTS = 256  # the step times a summary keeps: each the mean of its share of the steps


def device_clock() -> Callable[[], float]:
    """The clock a profiled run reads: ``time.perf_counter``, after the work queued on the GPU once CUDA is in use."""
    import torch

    if not torch.cuda.is_available():
        return time.perf_counter

    def now() -> float:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return time.perf_counter()

    return now


@dataclass
class PhaseClock:
    now: Callable[[], float] = time.perf_counter  # the clock read, after the device's work when on CUDA
    seconds: dict = field(default_factory=dict)  # phase (or (DATA, loader)) -> seconds so far
    updates: int = 0
    span: float = 0.0  # seconds from the first phase entered to the end of the latest update
    at_update: dict = field(default_factory=dict)  # ``seconds`` as it stood at the end of the latest update
    steps: list = field(default_factory=list)  # seconds of each step: from the end of one update to the next's
    _stack: list = field(default_factory=list)
    _began: float | None = None
    _last: float = 0.0

    def enter(self, phase) -> None:
        now = self.now()
        if self._began is None:
            self._began = self._last = now
        self._charge(now)
        self._stack.append(phase)

    @contextlib.contextmanager
    def phase(self, phase) -> Iterator[None]:
        """``phase`` for the time of a ``with`` block."""
        self.enter(phase)
        try:
            yield
        finally:
            self.leave(phase)

    def leave(self, phase) -> None:
        """End ``phase`` (and any phase left open inside it: a hook whose pair never ran after an exception)."""
        if phase not in self._stack:
            return
        self._charge(self.now())
        while self._stack and self._stack.pop() != phase:
            pass

    def update_end(self) -> None:
        """An update was applied: the steps so far are complete."""
        if self._began is None:
            return
        now = self.now()
        self._charge(now)
        self.updates += 1
        self.steps.append(now - self._began - self.span)
        self.span = now - self._began
        self.at_update = dict(self.seconds)

    def _charge(self, now: float) -> None:
        phase = self._stack[-1] if self._stack else OTHER
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now

    def summary(self, training_loaders: set[int]) -> dict:
        """Seconds per phase over the profiled span (up to the end of the last update), loader waits split into
        training data and evaluation, and the steps' durations (at most ``POINTS``, each the mean of its share of
        the steps): {"updates", "span_s", "phases": {phase: seconds}, "steps_s": [seconds]}."""
        phases = dict.fromkeys((DATA, FORWARD, BACKWARD, OPTIMIZER, EVALUATION, CHECKER, OTHER), 0.0)
        for key, seconds in self.at_update.items():
            if isinstance(key, tuple):
                phases[DATA if key[1] in training_loaders else EVALUATION] += seconds
            else:
                phases[key] = phases.get(key, 0.0) + seconds
        n = min(POINTS, len(self.steps))
        shares = [self.steps[i * len(self.steps) // n:(i + 1) * len(self.steps) // n] for i in range(n)]
        return {"updates": self.updates, "span_s": self.span, "phases": phases,
                "steps_s": [sum(share) / len(share) for share in shares]}
