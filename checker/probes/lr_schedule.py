"""lr-schedule: a learning-rate scheduler is stepped at the granularity its own settings call for.

Rule: every scheduler's ``step()`` calls are counted against the updates of its
optimizer and the training epochs (DataLoader passes with updates), which gives
the granularity it was stepped at: per update, per epoch, or neither. Only
unambiguous evidence fails:

* stepped before its optimizer's first update (the schedule runs one step ahead;
  not when a GradScaler skipped that update);
* OneCycleLR or CyclicLR (schedules over optimizer steps by definition) stepped per epoch;
* a horizon (``T_max``, ``total_iters``) equal to the run's number of updates but
  stepped per epoch (or, in a run without DataLoader epochs, at most every other
  update), or equal to its number of epochs but stepped per update. A LambdaLR's
  horizon is read from its function: the first step at which the multiplier falls to
  zero (below 1e-9 of its largest) after being positive, e.g. warm-up + cosine over
  ``epochs * chunks`` steps (the ``lm`` reference: 64, stepped 64 times per update,
  4 times when stepped per epoch); a function that never reaches zero has none;
* the learning rate below 1e-6 of its start for at least a quarter of the updates;
* stepped once per backward pass (per micro-batch) while its optimizer accumulated
  gradients over two or more backward passes per update: the schedule ran K times
  ahead of the optimizer (measured on ``text``: 24 steps in 12 updates of 24
  backwards, against 12 in 12); not when its horizon is the number of backward passes.

It passes when the granularity agrees with the scheduler: OneCycleLR/CyclicLR per
update, a horizon matching the updates (per update) or the epochs (per epoch),
a warm-up horizon shorter than the run per update, StepLR, MultiStepLR,
ExponentialLR or ReduceLROnPlateau per epoch, any schedule stepped per update whose
rate heads to zero exactly at the run's last update (a linear or cosine decay
over this run's steps). A scheduler resumed from a checkpoint (built afresh, its step
count loaded) continues the one whose step count ended where it starts: the two are
judged as one curve over the whole run (its LambdaLR horizon too). Everything else (a horizon that
matches neither, e.g. ``T_max=200`` in a 3-epoch run; a LambdaLR whose function
never reaches zero, and other schedules whose intent is code; schedulers nested in SequentialLR) cannot be told.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "lr-schedule"
TITLE = "learning-rate schedule"
SYMPTOM_ID, SYMPTOM = "lr-curve", "learning-rate curve"
PER_STEP = {"OneCycleLR", "CyclicLR"}
PER_EPOCH = {"StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau"}
WARMUP = {"LinearLR", "ConstantLR"}
HORIZONS = {"OneCycleLR": "total_steps", "CosineAnnealingLR": "T_max", "LinearLR": "total_iters",
            "ConstantLR": "total_iters", "PolynomialLR": "total_iters"}
COLLAPSE, COLLAPSED_SHARE = 1e-6, 0.25
ZERO = 1e-9  # a LambdaLR multiplier this small, relative to its largest before, is zero: the end of its horizon


@dataclass
class ScheduleRecord:
    type: str  # the scheduler's class
    base: str  # the torch.optim.lr_scheduler class it is, or derives from
    horizon: int | None = None
    calls: int = 0  # step() calls not made by another scheduler
    nested: bool = False  # stepped by another scheduler (SequentialLR, ChainedScheduler)
    updates_at_first_call: int | None = None
    skipped_before_first_call: bool = False  # a GradScaler skipped an update before the first call
    updates: int = 0  # updates of its optimizer
    epochs: int = 0  # training passes with updates of its optimizer
    lrs: list[float] = field(default_factory=list)  # its optimizer's first group's rate at each update
    backwards: int = 0  # backward passes whose gradients its optimizer's updates applied
    start: int = 0  # its step count (last_epoch) before its first step() call: above 0 when loaded from a checkpoint
    end: int = 0  # its step count after its latest step() call
    resumes: int = 0  # schedulers that continued this one from a checkpoint, merged into this record


@dataclass
class Observation:
    schedulers: list[ScheduleRecord] = field(default_factory=list)

    def __post_init__(self) -> None:  # read back from JSON
        self.schedulers = [ScheduleRecord(**s) if isinstance(s, dict) else s for s in self.schedulers]


class Observer:
    def __init__(self, session):
        self.session = session
        self.schedulers: list = []
        self.records: list[ScheduleRecord] = []
        self.passes: list[set] = []
        session.on(Event.SCHEDULER, ID, self.on_scheduler)
        session.on(Event.SCHEDULER_STEP, ID, self.on_step)
        session.on(Event.UPDATE_PRE, ID, self.on_update)
        session.on(Event.BACKWARD, ID, self.on_backward)
        self.backwards_since_update = 0

    def on_backward(self, loss) -> None:
        self.backwards_since_update += 1

    def on_scheduler(self, scheduler) -> None:
        base = torch_base(type(scheduler))
        horizon = getattr(scheduler, HORIZONS[base], None) if base in HORIZONS else None
        self.schedulers.append(scheduler)
        self.records.append(ScheduleRecord(type(scheduler).__name__, base,
                                           horizon if isinstance(horizon, int) else None))
        self.passes.append(set())

    def on_step(self, scheduler, nested: bool) -> None:
        i = next((i for i, s in enumerate(self.schedulers) if s is scheduler), None)
        if i is None:
            return
        record = self.records[i]
        if nested:
            record.nested = True
            return
        step_count = getattr(scheduler, "last_epoch", None)
        if isinstance(step_count, int):
            if record.calls == 0:
                record.start = step_count - 1
            record.end = step_count
        if record.updates_at_first_call is None:
            record.updates_at_first_call = record.updates
            record.skipped_before_first_call = self.session.scaler_skips > 0
        record.calls += 1

    def on_update(self, update) -> None:
        for scheduler, record, passes in zip(self.schedulers, self.records, self.passes):
            if getattr(scheduler, "optimizer", None) is update.optimizer and not update.manual:
                record.updates += 1
                record.backwards += self.backwards_since_update
                record.lrs.append(float(update.optimizer.param_groups[0]["lr"]))
                if update.pass_index is not None:
                    passes.add(update.pass_index)
        if not update.manual:
            self.backwards_since_update = 0

    def summary(self) -> Observation:
        records, passes, firsts = resumed(self.records, self.passes)  # a resumed schedule's horizon is the whole run's
        for record, seen, first in zip(records, passes, firsts):
            record.epochs = sum(1 for p in seen if self.session.role(p) == "train")
            if record.base == "LambdaLR" and record.horizon is None and record.updates:
                record.horizon = lambda_horizon(self.schedulers[first], 4 * record.updates + 8)
        return Observation(records)


def resumed(records: list[ScheduleRecord], passes: list[set]) -> tuple[list[ScheduleRecord], list[set], list[int]]:
    """One record per schedule: a scheduler that starts from a loaded step count (a resume from a checkpoint) continues
    the earlier scheduler of the same class whose step count ended exactly there; their curves are joined, since the
    schedule's horizon is the whole run's, not the part after the resume."""
    kept, kept_passes, firsts = [], [], []
    for i, (record, seen) in enumerate(zip(records, passes)):
        earlier = next((i for i in range(len(kept) - 1, -1, -1) if record.start > 0 and not record.nested
                        and kept[i].type == record.type and not kept[i].nested and kept[i].calls
                        and kept[i].end == record.start), None)
        if earlier is None:
            kept.append(replace(record, lrs=list(record.lrs)))
            kept_passes.append(set(seen))
            firsts.append(i)
            continue
        joined = kept[earlier]
        joined.calls += record.calls
        joined.updates += record.updates
        joined.backwards += record.backwards
        joined.lrs += record.lrs
        joined.end = record.end
        joined.resumes += 1
        if joined.updates_at_first_call is None:
            joined.updates_at_first_call = record.updates_at_first_call
        kept_passes[earlier] |= seen
    return kept, kept_passes, firsts


def lambda_horizon(scheduler, limit: int) -> int | None:
    """For a LambdaLR, the first step k at which its first group's multiplier falls to zero after being positive (a
    warm-up and decay written as code, over k steps), looked for up to ``limit``; None when it does not, or the
    function fails. The function is the script's own, pure by LambdaLR's contract (it is called with the step)."""
    try:
        function, top = scheduler.lr_lambdas[0], 0.0
        for k in range(limit):
            value = float(function(k))
            if k and top > 0 and abs(value) <= ZERO * top:
                return k
            top = max(top, value)
    except Exception:  # the script's code, not the checker's: no horizon
        return None
    return None


def torch_base(cls: type) -> str:
    """The nearest class of torch.optim.lr_scheduler in ``cls``'s ancestry (a user subclass has one)."""
    for klass in cls.__mro__:
        if klass.__module__ == "torch.optim.lr_scheduler":
            return klass.__name__
    return cls.__name__


def granularity(r: ScheduleRecord) -> str:
    """"update", "epoch", "either" (one update per epoch: they coincide) or "other"."""
    per_update = abs(r.calls - r.updates) <= max(1, r.epochs)
    per_epoch = r.epochs >= 2 and abs(r.calls - r.epochs) <= 1
    if per_update and per_epoch:
        return "either"
    return "update" if per_update else "epoch" if per_epoch else "other"


def per_backward(r: ScheduleRecord) -> bool:
    """Stepped once per micro-batch while its optimizer accumulated over two or more of them per update."""
    if r.updates < 2 or r.backwards < 2 * r.updates or r.calls < 1.5 * r.updates:
        return False
    if r.horizon and near(r.horizon, r.calls):
        return False  # a horizon counted in micro-batches: the curve is complete, its pace the script's choice
    return abs(r.calls - r.backwards) <= max(1, r.epochs)


def near(value: int, target: int) -> bool:
    return abs(value - target) <= max(1, round(0.05 * target))


def ends_at_zero(lrs: list[float]) -> bool:
    """The rate falls to (nearly) zero and would reach it right after the last update: a horizon of this run."""
    if len(lrs) < 3 or max(lrs) <= 0:
        return False
    last, before = lrs[-1], lrs[-2]
    return last < before and last <= 0.05 * max(lrs) and 2 * last - before <= 1e-12 * max(lrs)


def judge_one(r: ScheduleRecord) -> tuple[str, str, str]:
    """(status, message, observed) for one scheduler: the diagnosis, and the curve as it was seen."""
    name, how = r.type, granularity(r)
    stepped = {"update": "once per optimizer step", "epoch": "once per epoch", "either": "once per epoch",
               "other": f"{r.calls} times in {r.updates} updates and {r.epochs} epochs"}[how]
    changed = f"the schedule advanced {r.calls} times in {r.updates} updates and {r.epochs} epochs"
    if r.calls == 0:
        return (CANNOT_TELL, f"{name} was never stepped while its optimizer made {r.updates} updates",
                f"the learning rate kept its first value through all {r.updates} updates")
    if per_backward(r):
        return FAIL, (f"{name} was stepped once per backward pass ({r.calls} times) while its optimizer stepped "
                      f"once every {r.backwards / r.updates:.0f} backward passes ({r.updates} updates): the schedule "
                      f"ran {r.calls / r.updates:.0f} times ahead"), (
            f"the learning rate moved {r.calls / r.updates:.0f} steps along {name}'s curve between updates")
    if r.updates_at_first_call == 0 and not r.skipped_before_first_call:
        return FAIL, (f"{name} was stepped before its optimizer's first update, so the learning rate ran one step "
                      "ahead of the schedule"), f"the first update already used the second value of {name}'s curve"
    start = r.lrs[0] if r.lrs else 0.0
    collapsed = sum(1 for lr in r.lrs if start > 0 and lr < COLLAPSE * start)
    if r.lrs and collapsed >= COLLAPSED_SHARE * len(r.lrs):
        return FAIL, (f"stepped {stepped}, {name} drove the learning rate below {COLLAPSE:g} of its start at "
                      f"{collapsed} of {len(r.lrs)} updates"), (
            f"the learning rate was below {COLLAPSE:g} of its start at {collapsed} of {len(r.lrs)} updates")
    if how == "either":
        return (CANNOT_TELL, f"{name}: one update per epoch, so per-step and per-epoch stepping look alike",
                "one update per epoch: the curve cannot show at which pace it was meant to move")
    horizon = r.horizon or r.updates
    if r.base in PER_STEP:
        if how == "update":
            return (PASS, f"{name} was stepped once per optimizer step, as its schedule over steps needs",
                    f"the learning rate followed {name}'s curve, one value per update")
        if how == "epoch":
            return FAIL, (f"{name} is a schedule over optimizer steps (it expects {r.horizon or 'one step per update'}) "
                          f"but was stepped once per epoch: {r.calls} times in {r.updates} updates"), (
                f"in {r.updates} updates the learning rate moved through {r.calls} of the {horizon} values of "
                f"{name}'s curve")
    if r.horizon and (r.base in HORIZONS or r.base == "LambdaLR"):
        if (how == "epoch" or (how == "other" and r.calls <= r.updates // 2)) and near(r.horizon, r.updates) \
                and r.horizon != r.epochs:
            return FAIL, (f"{name}'s horizon ({r.horizon}) is this run's number of optimizer steps, but it was "
                          f"stepped {'once per epoch: ' if how == 'epoch' else 'only '}{r.calls} times in "
                          f"{r.updates} updates"), (
                f"in {r.updates} updates the learning rate moved through {r.calls} of the {r.horizon} values of "
                f"{name}'s curve")
        if how == "update" and r.horizon == r.epochs and not near(r.horizon, r.updates):
            return FAIL, (f"{name}'s horizon ({r.horizon}) is this run's number of epochs, but it was stepped once "
                          f"per optimizer step: it ran through its schedule {r.updates / r.horizon:.0f} times"), (
                f"in {r.updates} updates the learning rate ran through {name}'s whole curve of {r.horizon} values "
                f"{r.updates / r.horizon:.0f} times")
        if how == "epoch" and abs(r.horizon - r.epochs) <= 1:
            return (PASS, f"{name} was stepped once per epoch over a horizon of {r.horizon} epochs",
                    f"the learning rate followed {name}'s curve over the run's {r.epochs} epochs")
        if how == "update" and (near(r.horizon, r.updates) or (r.base in WARMUP and r.horizon < r.updates)):
            return (PASS, f"{name} was stepped once per optimizer step over a horizon of {r.horizon} steps",
                    f"the learning rate followed {name}'s curve over the run's {r.updates} updates")
        return CANNOT_TELL, (f"{name} was stepped {stepped}; its horizon ({r.horizon}) matches neither this run's "
                             f"{r.updates} optimizer steps nor its {r.epochs} epochs"), (
            f"{name}'s curve has {r.horizon} values; {changed}")
    if r.base in PER_EPOCH and how == "epoch":
        return (PASS, f"{name}, an epoch schedule, was stepped once per epoch",
                f"the learning rate followed {name}'s curve, one value per epoch")
    if how == "update" and ends_at_zero(r.lrs):
        return (PASS, f"{name} was stepped once per optimizer step and its rate reaches zero at the run's last step",
                "the learning rate reached zero at the run's last update")
    return (CANNOT_TELL, f"{name} was stepped {stepped}; nothing in its settings says which granularity it was built for",
            f"{changed}; nothing in {name}'s settings says which pace was meant")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    schedulers = [r for r in obs.schedulers if r.updates and not r.nested]
    if not schedulers:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no learning-rate scheduler drove an optimizer")
    verdicts = [judge_one(r) for r in schedulers]
    order = [FAIL, CANNOT_TELL, PASS]
    index = min(range(len(verdicts)), key=lambda i: order.index(verdicts[i][0]))
    status, message, observed = verdicts[index]
    chosen = schedulers[index]
    series = {"learning rate per step": chosen.lrs}
    measured = f"{chosen.calls} schedule steps / {chosen.updates} updates"
    return Finding(ID, TITLE, status, measured, "", message, series, observed=observed)
