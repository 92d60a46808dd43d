"""Questions about the run's shape, answered from the session's summary (no torch needed)."""
from __future__ import annotations

import math


def training_passes(facts: dict) -> list[dict]:
    return [p for p in facts["passes"] if p["role"] == "train"]


def evaluation_passes(facts: dict) -> list[dict]:
    return [p for p in facts["passes"] if p["role"] == "eval"]


def accumulation(facts: dict) -> int:
    """Backward passes per optimizer step, read off the first step (1 without accumulation)."""
    return max(1, facts.get("backwards_before_first_step") or 1)


def skipped_updates(facts: dict) -> tuple[int, int]:
    """(training batches that ended without the optimizer step they were due, training batches)."""
    k = accumulation(facts)
    passes = training_passes(facts)
    skipped = sum(max(0, p["batches"] // k - p["steps"]) * k for p in passes)
    return skipped, sum(p["batches"] for p in passes)


def finite(values: list) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]
