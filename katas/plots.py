"""Compact terminal plots: a series as one line of block characters, next to what was expected."""
from __future__ import annotations

import math

BLOCKS = "▁▂▃▄▅▆▇█"
MISSING = "✗"  # a NaN or infinite value


EXPECTED = {
    "graphs-retained": "expected: bounded, not growing",
    "grads-accumulate": "expected: 0",
    "eval-mode": "expected: 0",
    "train-mode": "expected: 0",
}


def sparkline(values: list, width: int = 48, low: float | None = None, high: float | None = None) -> str:
    """``values`` squeezed into ``width`` characters (each the mean of its share); None shows as ✗."""
    if not values:
        return ""
    chunks = [values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(min(width, len(values)))]
    points = [None if any(v is None or not math.isfinite(v) for v in c) else sum(c) / len(c) for c in chunks if c]
    finite = [p for p in points if p is not None]
    low = min(finite, default=0.0) if low is None else low
    high = max(finite, default=0.0) if high is None else high
    span = (high - low) or 1.0
    return "".join(MISSING if p is None else BLOCKS[min(7, max(0, int((p - low) / span * 7.999)))] for p in points)


def evidence(probe: str, series: dict[str, list]) -> list[tuple[str, str, str]]:
    """Rows (label, plot, note) for a probe's series, with what was expected where there is a bound."""
    rows = []
    if probe == "lr-schedule":
        observed = [v for v in series.get("learning rate per step", []) if v is not None]
        low, high = min(observed, default=0.0), max(observed, default=0.0)
        rows.append(("learning rate per step", sparkline(observed, low=low, high=high), f"{low:.2g}..{high:.2g}"))
    elif probe == "clip-order":
        norms, clip = series.get("applied gradient norm per step", []), series.get("clip value", [None])[0]
        over = sum(1 for n in norms if clip is not None and n > clip)
        rows.append(("gradient norm at each step", sparkline(norms, low=0.0),
                     f"max {max(norms, default=0):.3g}; clip {clip:g}: {over} steps above" if clip else ""))
    else:
        expected = EXPECTED.get(probe, "")
        for label, values in series.items():
            finite = [v for v in values if v is not None and math.isfinite(v)]
            note = f"{min(finite):.3g}..{max(finite):.3g}" if finite else ""
            if len(finite) < len(values):
                note += f"; {len(values) - len(finite)} not finite ({MISSING})"
            rows.append((label, sparkline(values, low=0.0 if finite and min(finite) >= 0 else None),
                         "; ".join(filter(None, [note, expected]))))
    return rows
