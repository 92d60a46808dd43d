"""Dropout and batch-norm behaviour per top-level forward, shared by the ``eval-mode`` and ``train-mode`` probes.

Modes are read from the computations themselves (``F.dropout`` and its
variants, ``F.batch_norm`` with running statistics), so module classes,
per-module ``eval()`` calls and hand-written layers that call those functions are
all seen the same way. Each forward's phase comes from the session's timeline.
"""
from __future__ import annotations


def forwards_in(session, phase: str) -> list:
    """The forwards of a phase that ran dropout or batch-norm, in order."""
    return [f for f in session.forwards if f.modes and session.phase(f) == phase]


def blocks(session, phase: str) -> list[list]:
    """Those forwards grouped into runs with no forward of another phase between them (e.g. validation passes)."""
    runs: list[list] = []
    previous = None
    for f in session.forwards:
        current = session.phase(f)
        if current == phase and f.modes:
            if previous != phase or not runs:
                runs.append([])
            runs[-1].append(f)
        if current is not None:
            previous = current
    return runs
