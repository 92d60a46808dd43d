"""graphs-retained: no batch's autograd graph outlives the batch after it.

Rule: each top-level model output that carries a graph gets a sentinel in its
``grad_fn.metadata``; the sentinel dies exactly when that graph node is freed.
When batch k starts, graphs from batch k-2 or earlier must all be gone. Memory is
a poor signal (``backward()`` frees activations, only graph nodes leak), so the
probe counts graphs, not bytes. ``.item()``, ``float()``, ``.detach()`` or
summing under ``no_grad`` pass; ``gc.collect()``, ``torch.cuda.empty_cache()``,
detaching only at the end of the epoch or keeping the losses in a list do not.
"""
from __future__ import annotations

import threading
from collections import Counter

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "graphs-retained"
TITLE = "graphs freed every step"
LAG = 2


class Observer:
    def __init__(self, session):
        self.session = session
        self.alive: Counter[int] = Counter()  # batch -> graphs of that batch still alive
        self.lock = threading.Lock()  # graphs may be freed on autograd's worker threads
        self.tagged: set[int] = set()
        self.leaked: set[int] = set()
        self.outputs = 0
        self.series: list[int] = []
        session.on("output", ID, self.on_output)
        session.on("batch", ID, self.on_batch)

    def clock(self) -> int:
        return self.session.batch_index if self.session.passes else self.outputs

    def on_output(self, module, output) -> None:
        self.outputs += 1
        tensor = first_tensor_with_graph(output)
        if tensor is None:
            return
        batch = self.clock()
        with self.lock:
            self.alive[batch] += 1
        if self.session.watch_graph(tensor, lambda: self._died(batch)):
            self.tagged.add(batch)

    def _died(self, batch: int) -> None:
        with self.lock:
            self.alive[batch] -= 1
            if self.alive[batch] <= 0:
                del self.alive[batch]

    def on_batch(self, batch) -> None:
        now = self.clock()
        with self.lock:
            self.leaked.update(b for b in self.alive if b <= now - LAG)
            self.series.append(len(self.alive))

    def summary(self) -> dict:
        return {"batches": len(self.tagged), "leaked": len(self.leaked & self.tagged),
                "max_alive": max(self.series, default=0), "alive_per_batch": self.series}


def first_tensor_with_graph(output):
    if hasattr(output, "grad_fn"):
        return output if output.grad_fn is not None else None
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    for item in items:
        found = first_tensor_with_graph(item)
        if found is not None:
            return found
    return None


def judge(obs: dict, facts: dict) -> Finding:
    batches, leaked = obs["batches"], obs["leaked"]
    series = {"graphs alive per batch": obs["alive_per_batch"]}
    if batches == 0:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no forward pass built an autograd graph")
    measured, threshold = f"{leaked} of {batches} batches", "0"
    if leaked:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"graphs from {leaked} of {batches} batches were still alive {LAG} batches later "
                       f"(up to {obs['max_alive']} at once)", series)
    return Finding(ID, TITLE, PASS, measured, threshold, "each batch's graph was freed by the next batch", series)
