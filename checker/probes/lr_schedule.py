"""lr-schedule: the learning rate follows the scheduler's curve at the granularity it was built for.

Rule: the scheduler's constructor arguments are recorded and the learning rate
of every parameter group is logged at each optimizer step. A fresh copy of the
scheduler, on a stand-in optimizer with the same hyper-parameters, is replayed
once per optimizer step and once per training epoch; the observed rates must
match the replay of the intended granularity (relative tolerance 1e-6).
OneCycleLR and CyclicLR are per-step schedules; StepLR, MultiStepLR and
ExponentialLR per-epoch ones; schedules with a horizon (CosineAnnealingLR,
LinearLR, ...) are per-step when the horizon is nearer the number of optimizer
steps than the number of epochs. For other schedulers either granularity
passes. A staircase per epoch, or ``total_steps=epochs`` stepped per epoch, fails.
"""
from __future__ import annotations

import math
import warnings

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "lr-schedule"
TITLE = "learning-rate schedule"
PER_STEP = {"OneCycleLR", "CyclicLR"}
PER_EPOCH = {"StepLR", "MultiStepLR", "ExponentialLR"}
HORIZONS = {"CosineAnnealingLR": "T_max", "LinearLR": "total_iters", "ConstantLR": "total_iters",
            "PolynomialLR": "total_iters", "OneCycleLR": "total_steps"}
RTOL = 1e-6


class Observer:
    def __init__(self, session):
        self.session = session
        self.schedulers: list = []
        self.lrs: dict[int, list[list[float]]] = {}  # scheduler index -> lrs at each step of its optimizer
        self.passes: dict[int, list[int | None]] = {}
        session.on("scheduler", ID, self.on_scheduler)
        session.on("step_pre", ID, self.on_step)

    def on_scheduler(self, scheduler) -> None:
        self.lrs[len(self.schedulers)], self.passes[len(self.schedulers)] = [], []
        self.schedulers.append(scheduler)

    def on_step(self, step) -> None:
        for i, scheduler in enumerate(self.schedulers):
            if scheduler.optimizer is step.optimizer:
                self.lrs[i].append([float(g["lr"]) for g in step.optimizer.param_groups])
                self.passes[i].append(step.pass_index)

    def summary(self) -> dict:
        return {"schedulers": [self._summarise(i, s) for i, s in enumerate(self.schedulers)]}

    def _summarise(self, i: int, scheduler) -> dict:
        spec = scheduler._kata_spec
        observed, passes = self.lrs[i], self.passes[i]
        ordinals = epoch_ordinals(passes)
        per_step, step_error = self._replay(spec, len(observed))
        epochs = (max(ordinals) + 1) if ordinals else 0
        per_epoch, epoch_error = self._replay(spec, epochs) if ordinals else (None, "steps ran outside any DataLoader")
        expected_epoch = [per_epoch[o] for o in ordinals] if per_epoch and len(per_epoch) == epochs else None
        horizon = HORIZONS.get(spec.cls.__name__)
        return {
            "type": spec.cls.__name__,
            "horizon": getattr(scheduler, horizon, None) if horizon else None,
            "steps": len(observed),
            "epochs": epochs,
            "step_ordinals": ordinals,
            "observed": [lr[0] for lr in observed],
            "per_step": compare(observed, per_step, step_error),
            "per_epoch": compare(observed, expected_epoch, epoch_error),
        }

    def _replay(self, spec, count: int) -> tuple[list[list[float]] | None, str | None]:
        """The learning rates of a fresh copy of the scheduler after 0, 1, ... count-1 steps."""
        import torch

        class StandIn(torch.optim.Optimizer):
            def step(self, closure=None):
                return None

        rates: list[list[float]] = []
        try:
            with self.session.quiet(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                groups = [{**g, "params": [torch.zeros(1, requires_grad=True)]} for g in spec.groups]
                optimizer = StandIn(groups, dict(spec.defaults))
                swap = lambda a: optimizer if a is spec.optimizer else a  # noqa: E731
                scheduler = spec.cls(*map(swap, spec.args), **{k: swap(v) for k, v in spec.kwargs.items()})
                for n in range(count):
                    if n:
                        scheduler.step()
                    rates.append([float(g["lr"]) for g in optimizer.param_groups])
                return rates, None
        except Exception as exc:
            return rates or None, f"{type(exc).__name__}: {exc}"


def epoch_ordinals(passes: list[int | None]) -> list[int]:
    """For each step, the number of earlier training passes (epochs) of that optimizer."""
    if not passes or any(p is None for p in passes):
        return []
    order: dict[int, int] = {}
    return [order.setdefault(p, len(order)) for p in passes]


def compare(observed: list[list[float]], expected: list[list[float]] | None, error: str | None) -> dict:
    if expected is None:
        return {"mismatches": None, "error": error or "could not replay", "expected": []}
    mismatches = sum(
        1 for i, lrs in enumerate(observed)
        if i >= len(expected) or any(not math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12) for a, b in zip(lrs, expected[i]))
    )
    return {"mismatches": mismatches, "error": error, "expected": [lr[0] for lr in expected]}


def intended(s: dict) -> str | None:
    """'per_step', 'per_epoch', or None when the scheduler's type does not say."""
    if s["type"] in PER_STEP:
        return "per_step"
    if s["type"] in PER_EPOCH:
        return "per_epoch"
    if s["horizon"] and s["steps"] and s["epochs"]:
        to_steps, to_epochs = abs(math.log(s["horizon"] / s["steps"])), abs(math.log(s["horizon"] / s["epochs"]))
        return "per_step" if to_steps <= to_epochs else "per_epoch"
    return None


def shape_of(observed: list[float], ordinals: list[int]) -> str:
    changes = [i for i in range(1, len(observed)) if not math.isclose(observed[i], observed[i - 1], rel_tol=RTOL)]
    if not changes:
        return "it never changed"
    if ordinals and all(ordinals[i] != ordinals[i - 1] for i in changes):
        return "it changed only between epochs"
    return f"it changed at {len(changes)} of {len(observed) - 1} steps"


def judge_one(s: dict) -> tuple[bool, str, str, str]:
    """(ok, measured, threshold, message) for one scheduler."""
    n, name = s["steps"], s["type"]
    want = intended(s)
    options = [want] if want else ["per_step", "per_epoch"]
    results = {g: s[g]["mismatches"] for g in options if s[g]["mismatches"] is not None}
    if not results:
        return True, "", "", f"{name}: the schedule could not be replayed ({s[options[0]]['error']})"
    best = min(results, key=results.get)
    wrong = results[best]
    label = {"per_step": "once per optimizer step", "per_epoch": "once per epoch"}[best]
    measured, threshold = f"{wrong} of {n} steps off", "0"
    if wrong:
        return False, measured, threshold, (
            f"the learning rate differed from {name} stepped {label} at {wrong} of {n} optimizer steps "
            f"({shape_of(s['observed'], s['step_ordinals'])})")
    return True, measured, threshold, f"the learning rate followed {name} stepped {label}"


def judge(obs: dict, facts: dict) -> Finding:
    schedulers = [s for s in obs["schedulers"] if s["steps"]]
    if not schedulers:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no learning-rate scheduler drove an optimizer")
    verdicts = [judge_one(s) for s in schedulers]
    first = schedulers[0]
    want = intended(first) or "per_step"
    series = {"learning rate per step": first["observed"], "scheduled learning rate": first[want]["expected"]}
    failed = [v for v in verdicts if not v[0]]
    ok, measured, threshold, message = (failed or verdicts)[0]
    return Finding(ID, TITLE, PASS if ok else FAIL, measured, threshold, message, series)
