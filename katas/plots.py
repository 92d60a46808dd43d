"""Compact terminal plots: a series as one line of block characters, between the values its ends stand for."""
from __future__ import annotations

import math
from dataclasses import dataclass

BLOCKS = "▁▂▃▄▅▆▇█"
MISSING = "✗"  # a NaN or infinite value

EXPECTED = {
    "graphs-retained": "expected: bounded, not growing",
    "grads-accumulate": "expected: 0",
    "eval-mode": "expected: 0",
    "train-mode": "expected: 0",
}


def sparkline(values: list, width: int = 48, low: float | None = None, high: float | None = None) -> str:
    """``values`` in at most ``width`` characters: one per value, or each the mean of its share; None shows as ✗."""
    if not values or width < 1:
        return ""
    n = min(width, len(values))
    chunks = [values[i * len(values) // n:(i + 1) * len(values) // n] for i in range(n)]
    points = [None if any(v is None or not math.isfinite(v) for v in c) else sum(c) / len(c) for c in chunks]
    finite = [p for p in points if p is not None]
    low = min(finite, default=0.0) if low is None else low
    high = max(finite, default=0.0) if high is None else high
    span = high - low
    return "".join(MISSING if p is None else BLOCKS[0 if span <= 0 else min(7, max(0, int((p - low) / span * 7.999)))]
                   for p in points)


@dataclass
class Plot:
    label: str
    values: list
    low: float
    high: float
    note: str = ""

    @property
    def scale(self) -> tuple[str, str]:
        """What the lowest and the highest block stand for."""
        return f"{self.low:.3g}", f"{self.high:.3g}"

    def draw(self, width: int) -> str:
        return sparkline(self.values, width, self.low, self.high)


def evidence(probe: str, series: dict[str, list]) -> list[Plot]:
    """A probe's series as plots, with what was expected where there is a bound."""
    if probe == "lr-schedule":
        observed = [v for v in series.get("learning rate per step", []) if v is not None]
        return [Plot("learning rate per step", observed, min(observed, default=0.0), max(observed, default=0.0))] \
            if observed else []
    if probe == "clip-order":
        norms, clip = series.get("applied gradient norm per step", []), series.get("clip value", [None])[0]
        if not norms:
            return []
        over = sum(1 for n in norms if clip is not None and n > clip)
        note = f"clip value {clip:g}: {over} of {len(norms)} steps above it" if clip is not None else ""
        return [Plot("gradient norm at each step", norms, 0.0, max(max(norms), clip or 0.0), note)]
    plots = []
    for label, values in series.items():
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if not values:
            continue
        notes = [f"{len(values) - len(finite)} of {len(values)} not finite ({MISSING})"] if len(finite) < len(values) else []
        notes += [EXPECTED[probe]] if probe in EXPECTED else []
        low = 0.0 if finite and min(finite) >= 0 else min(finite, default=0.0)
        plots.append(Plot(label, values, low, max(finite, default=0.0), "; ".join(notes)))
    return plots
