"""resume-state: training resumed from a checkpoint continues where it stopped.

Rule: a resume is a module's ``load_state_dict`` fed weights that this run
saved with ``torch.save`` after it had made updates, followed by an update from
an optimizer that made none before that save (one built afresh). At that first
update, compared with the optimizer that had been training at the save:

* its state must not be fresh where the saved one had state (Adam's
  ``exp_avg``, SGD's momentum buffers): a fresh state restarts the moment
  estimates (and Adam's bias correction) from zero;
* its learning rate must go on from the save: with a scheduler, its step count
  must not be behind the saved scheduler's (a fresh scheduler restarts its
  warm-up; one stepped per micro-batch is ahead, which is ``lr-schedule``'s
  concern); without one (rates set by hand), the rates must be those the next
  update would have used, or those of the last update before the save.

The premise is a restart of *this* training: the optimizer built afresh trains the
module the checkpoint was loaded into, and is of the same kind, over as many
parameters, as one that was training when the checkpoint was saved. Loading weights
before any update (fine-tuning a pretrained checkpoint), loading weights that this
run did not save, a rollback of weights that the same optimizer keeps training,
loading the best weights at the end and then building a new model and optimizer
for another experiment, a new stage with another optimizer (a new head, another
kind or number of parameters), and runs without a checkpoint are not resumes: not
applicable.
Measured on the ``text`` reference: optimizer state present and rate 2.48e-3 equal
to the saved 2.48e-3 (correct) against no state and 3.0e-4 (warm-up restart) with
only the model saved. Rebuilding the scheduler with ``last_epoch=N`` over a fresh
Adam fixes the rate but not the state, and still fails. Cheap: work happens only
at ``torch.save`` and ``load_state_dict`` calls and at the update after a load.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "resume-state"
TITLE = "resumed training state"
SYMPTOM_ID, SYMPTOM = "resume-continuity", "training right after the resume"
RTOL = 1e-6


@dataclass
class Observation:
    resumes: int = 0
    fresh_state: int = 0  # resumes whose optimizer started without the state the saved one had
    lr_off: int = 0  # resumes whose learning rates were not the saved schedule's
    saved_lrs: list[float] = field(default_factory=list)  # of the first resume judged
    resumed_lrs: list[float] = field(default_factory=list)
    saved_step: int | None = None  # the step count of the saved scheduler, of the resumed one
    resumed_step: int | None = None


@dataclass
class Snapshot:
    optimizers: list  # (optimizer, had state, rates for the next update, rates of the last update, param count,
    # the step count of its scheduler or None)


def fingerprints(obj, depth: int = 0) -> list[tuple]:
    """Fingerprints of the state dicts (dicts of tensors) inside a saved object."""
    import torch

    found = []
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        found.append(fingerprint(obj))
    elif depth < 3 and isinstance(obj, dict):
        for v in obj.values():
            found += fingerprints(v, depth + 1)
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for v in obj:
            found += fingerprints(v, depth + 1)
    return found


def fingerprint(state: dict) -> tuple:
    import torch

    with torch.no_grad():
        return (tuple(state), tuple(round(float(v.detach().double().sum()), 9) if v.numel() else 0.0
                                    for v in state.values()))


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.saves: dict[tuple, Snapshot] = {}
        self.pending: Snapshot | None = None  # a resume waiting for its first update
        self.last_lrs: dict[int, list[float]] = {}  # optimizer id -> rates of its last update
        self.schedulers: list = []
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.SCHEDULER, ID, self.schedulers.append)
        session.on(Event.SAVE, ID, lambda obj, f: self.on_save(obj))
        session.on(Event.LOAD_STATE, ID, lambda module, state_dict, result: self.on_load(module, state_dict))
        self.loaded: set[int] = set()  # ids of the parameters of the module the pending resume loaded into

    def on_save(self, obj) -> None:
        if not self.session.updates:
            return
        prints = fingerprints(obj)
        if not prints:
            return
        optimizers = []
        for opt in self.session.optimizers:
            if id(opt) not in self.last_lrs:
                continue
            params = sum(len(g["params"]) for g in opt.param_groups)
            optimizers.append((opt, any(len(s) for s in opt.state.values()),
                               [float(g["lr"]) for g in opt.param_groups], self.last_lrs[id(opt)], params,
                               self.step_count(opt)))
        for fp in prints:
            self.saves[fp] = Snapshot(optimizers)

    def on_load(self, module, state_dict) -> None:
        if not self.saves or not isinstance(state_dict, dict):
            return
        snapshot = self.saves.get(fingerprint(state_dict))
        if snapshot is not None and snapshot.optimizers:
            self.pending = snapshot
            self.loaded = {id(p) for p in module.parameters()}

    def on_update(self, update) -> None:
        if update.manual:
            return
        opt = update.optimizer
        pending, self.pending = self.pending, None
        try:
            if pending is not None:
                self.judge_resume(opt, pending)
        finally:
            self.last_lrs[id(opt)] = [float(g["lr"]) for g in opt.param_groups]

    def judge_resume(self, opt, snapshot: Snapshot) -> None:
        if any(saved is opt for saved, *_ in snapshot.optimizers):
            return  # the same optimizer goes on: a rollback of weights, not a resume
        if id(opt) in self.last_lrs:
            return  # it had been updating before: not built for the resume
        if not any(id(p) in self.loaded for g in opt.param_groups for p in g["params"]):
            return  # it trains other parameters than those loaded: a new experiment, not a resume
        params = sum(len(g["params"]) for g in opt.param_groups)
        candidates = [entry for entry in snapshot.optimizers if entry[4] == params and type(entry[0]) is type(opt)]
        if not candidates:
            return  # no optimizer of its kind over as many parameters was saved: a new stage, not a restart of one
        saved, had_state, next_lrs, last_lrs, _, saved_steps = candidates[0]
        steps = self.step_count(opt)
        has_state = any(len(opt.state.get(p, {})) for g in opt.param_groups for p in g["params"])
        lrs = [float(g["lr"]) for g in opt.param_groups]
        obs = self.obs
        obs.resumes += 1
        obs.fresh_state += had_state and not has_state
        if saved_steps is not None and steps is not None:  # a schedule: it must go on from where it was saved
            obs.lr_off += steps < saved_steps
        else:  # rates set by hand, or no scheduler: they must be the saved ones
            obs.lr_off += not (same(lrs, next_lrs) or same(lrs, last_lrs))
        if obs.resumes == 1:
            obs.saved_lrs, obs.resumed_lrs = next_lrs, lrs
            obs.saved_step, obs.resumed_step = saved_steps, steps

    def step_count(self, opt) -> int | None:
        """The step count (``last_epoch``) of the latest scheduler driving ``opt``, if any."""
        counts = [s.last_epoch for s in self.schedulers if getattr(s, "optimizer", None) is opt
                  and isinstance(getattr(s, "last_epoch", None), int)]
        return counts[-1] if counts else None

    def summary(self) -> Observation:
        return self.obs


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=RTOL, abs_tol=1e-12) for x, y in zip(a, b))


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.resumes:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="training did not resume from a checkpoint of this run")
    series = {"learning rates saved": obs.saved_lrs, "learning rates after the resume": obs.resumed_lrs}
    measured = f"{obs.fresh_state} fresh optimizer states, {obs.lr_off} rates off, of {obs.resumes} resumes"
    problems, seen = [], []
    if obs.fresh_state:
        problems.append("the optimizer restarted with an empty state where the saved one had moment estimates")
        seen.append("the first update after the resume moved the weights as a first-ever update does")
    if obs.lr_off:
        saved = obs.saved_lrs[0] if obs.saved_lrs else float("nan")
        now = obs.resumed_lrs[0] if obs.resumed_lrs else float("nan")
        if obs.saved_step is not None and obs.resumed_step is not None:
            problems.append(f"the scheduler went on from step {obs.resumed_step} where the saved one had reached "
                            f"step {obs.saved_step} (learning rate {now:.3g}, {saved:.3g} at the save)")
        else:
            problems.append(f"the learning rate was {now:.3g} where the schedule had reached {saved:.3g}")
        seen.append(f"the learning rate jumped from {saved:.3g} to {now:.3g} across the resume")
    if problems:
        return Finding(ID, TITLE, FAIL, measured, "0", "after resuming from the checkpoint, " + "; ".join(problems),
                       series, observed="; ".join(seen))
    return Finding(ID, TITLE, PASS, measured, "0",
                   "the resumed optimizer carried the saved state and the schedule's learning rate", series,
                   observed="training continued across the resume without a jump")
