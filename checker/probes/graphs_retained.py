"""graphs-retained: the number of autograd graphs alive at once stays bounded; it does not grow with the steps.

Rule: every top-level forward run with gradients gets a sentinel in its output's
``grad_fn.metadata``; the sentinel dies exactly when that graph node is freed.
At every update the graphs still alive *from before the previous update* are
counted (a series per optimizer, so that a GAN's alternating steps are compared
like with like): the graphs of the current step are due (a policy gradient keeps
an episode's, whatever its length, until the episode's backward pass), those of
earlier steps are not. The graphs alive are also counted at every batch of an
evaluation loader and at its end. A leak is growth: the count rising at each of at least ``GROWTH``
consecutive counts, a rise that either lasts to the end of the run or ends in a
drop (a total reset at the end of an epoch), never one that levels off (a bounded
buffer). A last batch's loss kept through a validation pass, ``self.loss`` on a
trainer, or a GAN's few graphs per iteration are bounded and pass. ``.item()``,
``float()``, ``.detach()`` or summing under ``no_grad`` pass; ``gc.collect()``,
``torch.cuda.empty_cache()``, detaching only at the end of the epoch or keeping
the losses in a list do not. Memory is a poor signal (``backward()`` frees
activations, only graph nodes leak), so the probe counts graphs, not bytes.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "graphs-retained"
TITLE = "graphs freed every step"
SYMPTOM_ID, SYMPTOM = "live-graphs", "autograd graphs alive per step"
GROWTH = 4
MIN_COUNTS = GROWTH + 1


@dataclass
class Observation:
    tagged: int = 0
    alive: list[list[int]] = field(default_factory=list)  # at each update, graphs alive from before the previous one,
    # per optimizer (or by hand)
    eval_alive: list[list[int]] = field(default_factory=list)  # ... at each batch of each evaluation pass


class Sentinel:
    """A weak-referenceable token that dies exactly when the graph node holding it dies."""


class Observer:
    def __init__(self, session):
        self.session = session
        self.alive = 0
        self.lock = threading.Lock()  # graphs may be freed on autograd's worker threads
        self.tagged = 0
        self.counts: list[tuple[int, int | None]] = []  # (alive, pass index of an evaluation batch or None)
        self.generations: dict[int, int] = {}  # updates made before a graph's forward -> graphs of it alive
        self.per_updater: dict[int, list[int]] = {}  # id of the optimizer (0: by hand) -> alive at its updates
        session.on(Event.FORWARD_END, ID, self.on_forward_end)
        session.on(Event.UPDATE_POST, ID, self.on_update)
        session.on(Event.BATCH, ID, self.on_batch)
        session.on(Event.PASS_END, ID, self.on_pass_end)

    def on_forward_end(self, forward, output) -> None:
        node = first_graph_node(output) if forward.grad else None
        if node is None:
            return
        sentinel = Sentinel()
        node.metadata.setdefault("kata_sentinels", []).append(sentinel)
        generation = self.session.updates
        with self.lock:
            self.alive += 1
            self.generations[generation] = self.generations.get(generation, 0) + 1
        self.tagged += 1
        weakref.finalize(sentinel, self._died, generation)

    def _died(self, generation: int) -> None:
        with self.lock:
            self.alive -= 1
            left = self.generations[generation] - 1
            if left:
                self.generations[generation] = left
            else:
                del self.generations[generation]

    def on_update(self, update) -> None:
        before = self.session.updates - 1  # graphs of forwards made before the previous update
        with self.lock:
            stale = sum(count for generation, count in self.generations.items() if generation < before)
        self.per_updater.setdefault(id(update.optimizer) if update.optimizer is not None else 0, []).append(stale)

    def on_batch(self, batch) -> None:
        self.counts.append((self.alive, self.session.current.index))

    def on_pass_end(self, observed) -> None:
        self.counts.append((self.alive, observed.index))

    def summary(self) -> Observation:
        evals: dict[int, list[int]] = {}
        for alive, pass_index in self.counts:
            if pass_index is not None and self.session.role(pass_index) == "eval":
                evals.setdefault(pass_index, []).append(alive)
        return Observation(self.tagged, list(self.per_updater.values()), list(evals.values()))


def first_graph_node(output):
    from checker.tensors import tensors_in

    return next((t.grad_fn for t in tensors_in(output) if t.grad_fn is not None), None)


def growth(alive: list[int]) -> tuple[int, int, int]:
    """The longest run of rises that lasts to the end or ends in a drop: (rises, start value, end value)."""
    best, run_start = (0, 0, 0), 0
    for i in range(1, len(alive) + 1):
        rising = i < len(alive) and alive[i] > alive[i - 1]
        if rising:
            continue
        rises = i - 1 - run_start
        ended_well = i == len(alive) or alive[i] < alive[i - 1]
        if ended_well and rises > best[0]:
            best = (rises, alive[run_start], alive[i - 1])
        run_start = i
    return best


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if obs.tagged == 0:
        if facts.updates and facts.backwards:
            return Finding(ID, TITLE, CANNOT_TELL, message="the model trained, but no output of a forward pass carried "
                                                            "its autograd graph where the checker could find it")
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no forward pass built an autograd graph")
    sequences = [(alive, "steps") for alive in obs.alive] + [(alive, "validation batches") for alive in obs.eval_alive]
    counted = [(alive, unit) for alive, unit in sequences if len(alive) >= MIN_COUNTS]
    if not counted:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="too few steps to see whether live graphs grow")
    (rises, start, end), unit, worst = max((growth(alive), unit, alive) for alive, unit in counted)
    which = "the autograd graphs of earlier steps still alive" if unit == "steps" else "the autograd graphs alive"
    series = {("graphs of earlier steps alive per step" if unit == "steps" else "graphs alive per validation batch"):
              worst}
    measured, threshold = f"{rises} rises in a row", f"< {GROWTH}"
    if rises >= GROWTH:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{which} grew at {rises} {unit} in a row, from {start} to {end}: earlier graphs are never "
                       "freed", series,
                       observed=f"{which} grew at {rises} {unit} in a row, from {start} to {end}: memory grows with "
                                "every step")
    peak = max(max(alive) for alive, _ in counted)
    return Finding(ID, TITLE, PASS, measured, threshold, f"the graphs left alive stayed bounded (at most {peak})",
                   series, observed=f"the autograd graphs left alive stayed bounded (at most {peak})")
