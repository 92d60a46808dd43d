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
RATE_FLOOR = 1e-2  # a rate this far below its start, and below where its epochs would leave it, has collapsed
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
    gaps: list[int] = field(default_factory=list)  # per update of its optimizer: its step() calls since the update
    # before (the first: since it was built)
    pending: int = 0  # step() calls since its optimizer's latest update


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

    def on_step(self, scheduler, nested: bool, before=None) -> None:
        i = next((i for i, s in enumerate(self.schedulers) if s is scheduler), None)
        if i is None:
            return
        record = self.records[i]
        if nested:
            record.nested = True
            return
        step_count = getattr(scheduler, "last_epoch", None)
        if isinstance(step_count, int):
            if record.calls == 0:  # where it starts: the count before its first step (loaded, or set by hand)
                record.start = before if isinstance(before, int) else step_count - 1
            record.end = step_count
        if record.updates_at_first_call is None:
            record.updates_at_first_call = record.updates
            record.skipped_before_first_call = self.session.scaler_skips > 0
        record.calls += 1
        record.pending += 1

    def on_update(self, update) -> None:
        for scheduler, record, passes in zip(self.schedulers, self.records, self.passes):
            if getattr(scheduler, "optimizer", None) is update.optimizer and not update.manual:
                record.updates += 1
                record.backwards += self.backwards_since_update
                record.lrs.append(float(update.optimizer.param_groups[0]["lr"]))
                record.gaps.append(record.pending)
                record.pending = 0
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
            kept.append(replace(record, lrs=list(record.lrs), gaps=list(record.gaps)))
            kept_passes.append(set(seen))
            firsts.append(i)
            continue
        joined = kept[earlier]
        joined.calls += record.calls
        joined.updates += record.updates
        joined.backwards += record.backwards
        joined.lrs += record.lrs
        joined.gaps += record.gaps
        joined.end = record.end
        joined.resumes += 1
        if joined.updates_at_first_call is None:
            joined.updates_at_first_call = record.updates_at_first_call
        kept_passes[earlier] |= seen
    return kept, kept_passes, firsts


def unfinished(obs: Observation) -> str | None:
    """A schedule the run left before half its own horizon, as ``"OneCycleLR over 1000 steps, left at step 30"``;
    None when every schedule with a horizon got at least half way (or none has one)."""
    for r in obs.schedulers:
        if r.horizon and r.calls and not r.nested and r.end < r.horizon / 2:
            return f"{r.type} over {r.horizon} steps, left at step {r.end}"
    return None


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


def counted_in_micro_batches(r: ScheduleRecord) -> bool:
    """Stepped once per backward pass while its optimizer accumulates over several, with a horizon of as many
    steps as it took: a schedule built over micro-batches (the script's choice of pace)."""
    return r.updates >= 1 and r.backwards >= 2 * r.updates and bool(r.horizon) and near(r.horizon, r.calls) \
        and abs(r.calls - r.backwards) <= max(1, r.epochs)


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


Verdict = tuple[str, str, str]  # (status, the diagnosis, what was seen)


def stepped(r: ScheduleRecord) -> str:
    return {"update": "once per optimizer step", "epoch": "once per epoch", "either": "once per epoch",
            "other": f"{times(r.calls)} in {r.updates} updates and {r.epochs} epochs"}[granularity(r)]


def never_stepped(r: ScheduleRecord) -> Verdict | None:
    if r.calls == 0:
        return (CANNOT_TELL, f"{r.type} was never stepped while its optimizer made {r.updates} updates",
                f"the learning rate kept its first value through all {r.updates} updates")
    return None


def per_micro_batch(r: ScheduleRecord) -> Verdict | None:
    if per_backward(r):
        return FAIL, (f"{r.type} was stepped once per backward pass ({times(r.calls)}) while its optimizer stepped "
                      f"once every {r.backwards / r.updates:.0f} backward passes ({r.updates} updates): the schedule "
                      f"ran {r.calls / r.updates:.0f} times ahead"), (
            f"the learning rate moved {r.calls / r.updates:.0f} steps along {r.type}'s curve between updates")
    return None


def ahead_of_first_update(r: ScheduleRecord) -> Verdict | None:
    if counted_in_micro_batches(r):
        return None  # its first step follows the first micro-batch: the pace it was built for
    if r.updates_at_first_call == 0 and not r.skipped_before_first_call:
        return FAIL, (f"{r.type} was stepped before its optimizer's first update, so the learning rate ran one step "
                      "ahead of the schedule"), f"the first update already used the second value of {r.type}'s curve"
    return None


def in_bursts(r: ScheduleRecord) -> Verdict | None:
    """A staircase: the schedule stood still for several updates, then advanced several steps at once, again and
    again (``scheduler.step()`` called once per batch, but all of them at the end of the epoch). The rate applied
    at each update is then not the schedule's value for that update: most of its values are never used."""
    later = r.gaps[1:]  # the first gap may be a resume's fast-forward before training
    bursts, stalls, still = [], [], 0  # each burst, and the updates at one rate before it
    for gap in later:
        if gap == 0:
            still += 1
        elif gap >= 2:
            bursts.append(gap)
            stalls.append(still)
            still = 0
        else:
            still = 0
    if len(bursts) < 2 or sorted(stalls)[len(stalls) // 2] < 1:
        return None
    jump, run = sorted(bursts)[len(bursts) // 2], sorted(stalls)[len(stalls) // 2] + 1
    unused = sum(bursts) - len(bursts)
    return FAIL, (f"{r.type} was stepped in bursts: {len(bursts)} times it advanced {jump} steps at once between two "
                  f"updates, after {run} updates at one rate, so the rate applied at each update was not the "
                  f"schedule's value for it ({unused} of its {r.calls} values were never applied)"), (
        f"the learning rate stayed at one value for {run} updates, then jumped {jump} values along {r.type}'s "
        f"curve, {len(bursts)} times")


def collapsed(r: ScheduleRecord) -> Verdict | None:
    start = r.lrs[0] if r.lrs else 0.0
    low = sum(1 for lr in r.lrs if start > 0 and lr < COLLAPSE * start)
    if r.lrs and low >= COLLAPSED_SHARE * len(r.lrs):
        return FAIL, (f"stepped {stepped(r)}, {r.type} drove the learning rate below {COLLAPSE:g} of its start at "
                      f"{low} of {len(r.lrs)} updates"), (
            f"the learning rate was below {COLLAPSE:g} of its start at {low} of {len(r.lrs)} updates")
    return None


def counts_epochs(r: ScheduleRecord) -> bool:
    """Whether the scheduler's own settings count in epochs: StepLR, MultiStepLR, ExponentialLR and
    ReduceLROnPlateau by their documentation, or a horizon equal to the run's number of epochs."""
    return r.base in PER_EPOCH or (bool(r.horizon) and r.horizon == r.epochs)


def collapsed_against_settings(r: ScheduleRecord) -> Verdict | None:
    """A schedule whose settings count in epochs, stepped once per update until its rate collapsed: a hundred
    times below its start, and a hundred times below where as many steps as the run had epochs leave it."""
    if granularity(r) != "update" or not counts_epochs(r) or not r.lrs or not 1 <= r.epochs < len(r.lrs):
        return None
    start, end, pace = r.lrs[0], r.lrs[-1], r.lrs[r.epochs]
    if start <= 0 or not (end < RATE_FLOOR * start and end < RATE_FLOOR * pace):
        return None
    return FAIL, (f"{r.type}'s settings count in epochs, but it was stepped once per optimizer step: after "
                  f"{r.updates} steps the learning rate was {end / start:.1e} of its start, where its {r.epochs} "
                  f"epochs would have left it at {pace / start:.2g}: the rate collapsed and training stalls"), (
        f"the learning rate fell to {end / start:.1e} of its start within the run's {r.epochs} epochs")


def past_its_horizon(r: ScheduleRecord) -> Verdict | None:
    """A decaying schedule stepped beyond the horizon its own settings declare: its curve ended inside the run
    (a cosine then climbs back up, a polynomial or a function that reached zero stays there)."""
    steps = max(r.end, r.start + r.calls)  # the step count it reached
    if not r.horizon or r.base in WARMUP or r.base in PER_STEP or steps <= r.horizon + max(1, round(0.05 * r.horizon)):
        return None
    reached, total = None, 0
    for k, gap in enumerate(r.gaps):
        total += gap
        if total >= r.horizon and reached is None:
            reached = k + 1
    after = "rose again" if r.base == "CosineAnnealingLR" else "stayed at its final value"
    unit = (", this run's number of epochs," if r.horizon == r.epochs and not near(r.horizon, r.updates) else "")
    at = f" at update {reached} of {r.updates}" if reached else ""
    return FAIL, (f"{r.type}'s horizon of {r.horizon} steps{unit} ended{at}: it was stepped {stepped(r)}, "
                  f"{steps} times, so its curve ended inside the run and the learning rate then {after}"), (
        f"the learning rate ran through {r.type}'s whole curve of {r.horizon} values{at}, then {after}")


def one_update_per_epoch(r: ScheduleRecord) -> Verdict | None:
    if granularity(r) == "either":
        return (CANNOT_TELL, f"{r.type}: one update per epoch, so per-step and per-epoch stepping look alike",
                "one update per epoch: the curve cannot show at which pace it was meant to move")
    return None


def step_schedule(r: ScheduleRecord) -> Verdict | None:
    """OneCycleLR and CyclicLR schedule optimizer steps by definition."""
    if r.base not in PER_STEP:
        return None
    how, horizon = granularity(r), r.horizon or r.updates
    if how == "update":
        return (PASS, f"{r.type} was stepped once per optimizer step, as its schedule over steps needs",
                f"the learning rate followed {r.type}'s curve, one value per update")
    if how == "epoch":
        return FAIL, (f"{r.type} is a schedule over optimizer steps (it expects {r.horizon or 'one step per update'}) "
                      f"but was stepped once per epoch: {times(r.calls)} in {r.updates} updates"), (
            f"in {r.updates} updates the learning rate moved through {r.calls} of the {horizon} values of "
            f"{r.type}'s curve")
    return None


def horizon_of_the_run(r: ScheduleRecord) -> Verdict | None:
    """A horizon (``T_max``, ``total_iters``, a LambdaLR's zero) read against the run's updates and epochs."""
    if not r.horizon or not (r.base in HORIZONS or r.base == "LambdaLR"):
        return None
    how = granularity(r)
    if counted_in_micro_batches(r):
        return (PASS, f"{r.type} was stepped once per backward pass over a horizon of {r.horizon} micro-batches, "
                      f"as many as the run had ({r.updates} updates of {r.backwards / r.updates:.0f} each)",
                f"the learning rate followed {r.type}'s curve over the run's {r.calls} micro-batches")
    if (how == "epoch" or (how == "other" and r.calls <= r.updates // 2)) and near(r.horizon, r.updates) \
            and r.horizon != r.epochs:
        return FAIL, (f"{r.type}'s horizon ({r.horizon}) is this run's number of optimizer steps, but it was "
                      f"stepped {'once per epoch: ' if how == 'epoch' else 'only '}{times(r.calls)} in "
                      f"{r.updates} updates"), (
            f"in {r.updates} updates the learning rate moved through {r.calls} of the {r.horizon} values of "
            f"{r.type}'s curve")
    if how == "epoch" and abs(r.horizon - r.epochs) <= 1:
        return (PASS, f"{r.type} was stepped once per epoch over a horizon of {r.horizon} epochs",
                f"the learning rate followed {r.type}'s curve over the run's {r.epochs} epochs")
    if how == "update" and (near(r.horizon, r.updates) or (r.base in WARMUP and r.horizon < r.updates)):
        return (PASS, f"{r.type} was stepped once per optimizer step over a horizon of {r.horizon} steps",
                f"the learning rate followed {r.type}'s curve over the run's {r.updates} updates")
    return CANNOT_TELL, (f"{r.type} was stepped {stepped(r)}; its horizon ({r.horizon}) matches neither this run's "
                         f"{r.updates} optimizer steps nor its {r.epochs} epochs"), (
        f"{r.type}'s curve has {r.horizon} values; the schedule advanced {times(r.calls)} in {r.updates} updates "
        f"and {r.epochs} epochs")


def epoch_schedule(r: ScheduleRecord) -> Verdict | None:
    if r.base in PER_EPOCH and granularity(r) == "epoch":
        return (PASS, f"{r.type}, an epoch schedule, was stepped once per epoch",
                f"the learning rate followed {r.type}'s curve, one value per epoch")
    return None


def decays_to_zero(r: ScheduleRecord) -> Verdict | None:
    if granularity(r) == "update" and ends_at_zero(r.lrs):
        return (PASS, f"{r.type} was stepped once per optimizer step and its rate reaches zero at the run's last step",
                "the learning rate reached zero at the run's last update")
    return None


# The decision table, in order: the first rule whose premise holds decides. Each rule's docstring (or message)
# names its evidence; what no rule decides cannot be told.
RULES = (never_stepped, per_micro_batch, ahead_of_first_update, in_bursts, collapsed, collapsed_against_settings,
         past_its_horizon, one_update_per_epoch, step_schedule, horizon_of_the_run, epoch_schedule, decays_to_zero)


def judge_one(r: ScheduleRecord) -> Verdict:
    """(status, message, observed) for one scheduler: the diagnosis, and the curve as it was seen."""
    for rule in RULES:
        verdict = rule(r)
        if verdict is not None:
            return verdict
    return (CANNOT_TELL, f"{r.type} was stepped {stepped(r)}; nothing in its settings says which granularity it was "
                         "built for",
            f"the schedule advanced {times(r.calls)} in {r.updates} updates and {r.epochs} epochs; nothing in "
            f"{r.type}'s settings says which pace was meant")


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


def times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
