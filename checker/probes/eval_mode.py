"""eval-mode: validation runs with dropout off and batch-norm frozen.

Rule: a DataLoader that never feeds a backward pass or an optimizer step is an
evaluation loader. In its batches no dropout may be applied and no batch-norm
may use batch statistics or update its running statistics. ``model.eval()``,
``model.train(False)`` and per-module ``eval()`` pass. Not applicable when no
dropout or batch-norm layer runs, or no evaluation pass ran.
"""
from __future__ import annotations

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes.mode_ledger import ModeLedger

ID = "eval-mode"
TITLE = "validation in eval mode"


class Observer(ModeLedger):
    def __init__(self, session):
        super().__init__(session, ID)


def judge(obs: dict, facts: dict) -> Finding:
    rows = [row for row in obs["passes"] if row["role"] == "eval"]
    if not obs["mode_sensitive_layers"]:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no dropout or batch-norm layer ran")
    if not rows:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no validation pass was observed")
    batches = sum(row["batches"] for row in rows)
    active = sum(row["active"] for row in rows)
    series = {"training-mode batches per validation pass": [row["active"] for row in rows]}
    measured, threshold = f"{active} of {batches} batches", "0"
    if active:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"dropout or batch-norm behaved as in training in {active} of {batches} validation batches",
                       series)
    return Finding(ID, TITLE, PASS, measured, threshold, "validation ran with dropout off and batch-norm frozen", series)
