"""train-mode: training batches run with dropout and batch-norm in training mode.

Rule: in every batch of a training loader (one that feeds backward passes or
optimizer steps) dropout must be applied and batch-norm must use batch
statistics. The usual failure is training resumed after a validation pass that
switched the model to evaluation mode and never switched it back. Not
applicable when no dropout or batch-norm layer runs.
"""
from __future__ import annotations

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes.mode_ledger import ModeLedger

ID = "train-mode"
TITLE = "training in train mode"


class Observer(ModeLedger):
    def __init__(self, session):
        super().__init__(session, ID)


def judge(obs: dict, facts: dict) -> Finding:
    rows = [row for row in obs["passes"] if row["role"] == "train"]
    if not obs["mode_sensitive_layers"]:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no dropout or batch-norm layer ran")
    if not rows:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no training pass was observed")
    batches = sum(row["batches"] for row in rows)
    inactive = sum(row["inactive"] for row in rows)
    series = {"eval-mode batches per training pass": [row["inactive"] for row in rows]}
    measured, threshold = f"{inactive} of {batches} batches", "0"
    if inactive:
        first = next(i for i, row in enumerate(rows) if row["inactive"])
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"dropout or batch-norm behaved as in evaluation in {inactive} of {batches} training batches "
                       f"(from training pass {first + 1} of {len(rows)} on)", series)
    return Finding(ID, TITLE, PASS, measured, threshold, "every training batch ran with dropout and batch-norm active",
                   series)
