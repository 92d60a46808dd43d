"""Per pass, how many batches ran dropout or batch-norm in training or in evaluation mode.

Shared by the ``eval-mode`` and ``train-mode`` probes. Modes are read from the
dropout and batch-norm computations themselves (``F.dropout``, ``F.batch_norm``),
so module classes, per-module ``eval()`` calls and hand-written layers that call
those functions are all seen the same way.
"""
from __future__ import annotations

from collections import defaultdict


class ModeLedger:
    def __init__(self, session, owner: str):
        self.session = session
        self.flags: set[str] = set()  # "active" / "inactive" seen in the current batch
        self.batch_pass: int | None = None
        self.counts: dict[int, dict[str, int]] = defaultdict(lambda: {"batches": 0, "active": 0, "inactive": 0})
        self.seen = False
        session.on("batch", owner, self.on_batch)
        session.on("mode", owner, self.on_mode)

    def on_mode(self, kind: str, training: bool) -> None:
        self.seen = True
        if self.session.current is not None:
            self.flags.add("active" if training else "inactive")

    def on_batch(self, batch) -> None:
        self._close_batch()
        self.batch_pass = self.session.current.index

    def _close_batch(self) -> None:
        if self.batch_pass is not None:
            row = self.counts[self.batch_pass]
            row["batches"] += 1
            for flag in self.flags:
                row[flag] += 1
        self.flags = set()

    def summary(self) -> dict:
        self._close_batch()
        self.batch_pass = None
        return {
            "mode_sensitive_layers": self.seen,
            "passes": [{"pass": i, "role": self.session.role(i), **row} for i, row in sorted(self.counts.items())],
        }
