"""The Python API: check a training script from a program or a test, as `kata check` would.

    from katas import check

    report = check("train.py", steps=100, args=["--config", "small.yaml"])
    report.assert_clean()                       # AssertionError naming each symptom and its evidence
    assert report.finding("zero-grad").status == "pass"

The report is :class:`checker.verdict.Report`, the object `kata check --json` prints (``report.to_json()``). A script
that cannot run, crashes or times out gives a report that says so (``report.ran``, ``report.verdict``,
``report.problem``); only arguments that contradict each other raise.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import click


def check(script: str | os.PathLike | None = None, *, module: str | None = None, args: Sequence[str] = (),
          steps: int | None = None, epochs: int | None = None, device: str = "cpu", timeout: float = 300,
          idle: float = 30, memory: float | None = None, nproc: int | None = None, profile: bool = False):
    """Run ``script`` (or ``module``, as ``python -m MODULE`` from the current folder) under observation with its
    own ``args``, and return the report. ``steps``/``epochs`` judge the first N updates or E passes over the
    training data, then stop it (a job that runs for hours); ``timeout``/``idle`` in seconds, ``memory`` in MB;
    ``nproc`` ranks of a distributed job; ``profile``: ``report.profile`` holds where the training steps' time went
    (seconds per phase, as ``kata check --profile``). A kata made by `kata new` is judged against its bug, as `kata
    check` judges it (nothing is recorded)."""
    from katas.commands.check import expectation
    from katas.commands.common import limits_of, observe, ranks_for, run_plan

    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
    if isinstance(args, str):
        raise TypeError("args is a sequence of arguments: args=['--lr', '3e-4'], not one string")
    if module and script is not None:
        raise ValueError("give a script or a module, not both")
    for name, value in (("steps", steps), ("epochs", epochs), ("nproc", nproc)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    try:
        path, plan = run_plan(None if script is None else Path(script), tuple(str(a) for a in args), module, steps,
                              epochs, profile)
    except click.ClickException as exc:
        raise ValueError(exc.format_message()) from None
    return observe(path, device, limits_of(timeout, idle, memory), nproc=ranks_for(path, nproc),
                   expect=expectation(path), plan=plan)
