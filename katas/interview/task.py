"""Generating an interview task: disguise a reference, then plant several bugs that do not overlap.

The bugs are planted into the *disguised* script, so the operators find their
sites by structure in code that no longer looks like the reference, and the
answer key speaks the candidate's names. Every planted line is tracked through
the later edits, which both keeps sites apart and lets the key say where each
bug is.
"""
from __future__ import annotations

import difflib
import random
from dataclasses import dataclass, field, replace

from katas.bugs import BUGS
from katas.catalogue import DIFFICULTIES, Bug, difficulty
from katas.engine.context import Context
from katas.engine.inject import sites
from katas.interview.disguise import disguise
from katas.interview.names import DESCRIPTIONS

LEVELS = tuple(DIFFICULTIES)  # easiest first
MAX_PLANTS = 200  # plants tried for one task before it is given up as asking for too many bugs
# Pairs that hide each other's symptom: without eval() there is no evaluation mode to get stuck in;
# a cut gradient path keeps the model from growing confident enough to reach log(0).
CONFLICTS = {frozenset({"eval-mode", "train-mode"}), frozenset({"detach", "log0"})}
# Without an optimizer step there is no update to carry old gradients, to clip, to schedule, to end up at log(0),
# and no step to keep a leaked graph across.
CONFLICTS |= {frozenset({"no-step", other}) for other in ("zero-grad", "clip-order", "scheduler", "log0", "leak")}
# An untrained model's printed accuracy gives too little to tell a miscounted denominator from chance.
CONFLICTS |= {frozenset({"no-step", "metric-count"})}
# Two bugs seen by one probe: fixing one would leave the symptom, and the grade could not tell which was fixed.
CONFLICTS |= {frozenset({"eval-mode", "functional-dropout"}), frozenset({"frozen", "detach"}),
              frozenset({"shape-broadcast", "metric-count"})}
# Without a step there is no learning rate to train a frozen part with, no parameter group read at a step, and
# no update for an unregistered block to miss.
CONFLICTS |= {frozenset({"no-step", other}) for other in ("frozen", "decay-norm", "orphan-params")}
# A detached block gets no gradient to miss; a float64 copy of the model leaves unregistered blocks in float32;
# a model that cannot learn (broadcast targets, shifted labels) never grows confident enough to reach log(0).
# A detach in front of the head leaves only the head's (correct) gradient for the finite-difference check.
CONFLICTS |= {frozenset({"orphan-params", "detach"}), frozenset({"orphan-params", "data-inplace"}),
              frozenset({"data-inplace", "detach"}),
              frozenset({"shape-broadcast", "log0"}), frozenset({"label-shift", "log0"})}
# Unshifted targets take away the next-token objective the causality check is premised on.
CONFLICTS |= {frozenset({"causal-mask", "no-shift"})}
CONFLICTS |= {frozenset({"pad-global", "no-grouping"})}  # one probe (padding-waste) sees both
CONFLICTS |= {frozenset({"pad-pool", "key-mask"})}  # one probe (pad-invariance) sees both
# No update: nothing accumulated, clipped, scheduled or resumed to judge. Stale gradients hide the micro-batch mean;
# a clip moved after the step leaves no clip before it to compare with.
CONFLICTS |= {frozenset({"no-step", other}) for other in ("accum-scale", "accum-sched", "unscale-clip", "resume-state")}
CONFLICTS |= {frozenset({"zero-grad", "accum-scale"}), frozenset({"clip-order", "unscale-clip"})}
# Data parallel. Without an update there are no replicas to compare and no stream drawn during training to judge;
# ranks that train on the same samples may draw the same random numbers; a loader without the DistributedSampler
# leaves no set_epoch to forget; and pairs that one probe sees.
CONFLICTS |= {frozenset({"no-step", other}) for other in ("ddp-module", "ddp-rank-seed")}
CONFLICTS |= {frozenset({"ddp-no-sampler", other}) for other in ("ddp-rank-seed", "ddp-set-epoch")}
CONFLICTS |= {frozenset({"ddp-metric", "metric-count"}), frozenset({"ddp-set-epoch", "no-shuffle"})}
# One probe (reported-metric) sees a count overwritten at each batch and the other ways a printed accuracy goes wrong;
# plain shuffling in place of the length-grouped sampler leaves no sampler of the script's own to seed.
CONFLICTS |= {frozenset({"metric-overwrite", other}) for other in ("metric-count", "ddp-metric", "shape-broadcast")}
CONFLICTS |= {frozenset({"sampler-epoch", "no-grouping"})}
# A model that cannot learn (shifted labels, broadcast targets) sits at chance, where a rate too high has no fall to
# undo and no climb to show; a detached (or frozen) body leaves a linear head, which tolerates the rate; without a step there
# is no rate at all. Shifted labels no longer match the copy of the label a leak wrote into the inputs.
CONFLICTS |= {frozenset({"lr-high", other}) for other in ("label-shift", "shape-broadcast", "detach", "frozen",
                                                          "no-step")}
# Inner steps written into the parameters leave no fast weights whose steps the meta-gradient could be checked on.
CONFLICTS |= {frozenset({"first-order", "inner-inplace"})}
CONFLICTS |= {frozenset({"label-leak", "label-shift"})}
# An evaluation of the training loader leaves no held-out data for a split's overlap to show in (val-leak sees both),
# reads training inputs whose jitter hides a label written into them, and scores the training shard, not the
# validation shard, whose count the reported metric is checked against.
CONFLICTS |= {frozenset({"val-on-train", other}) for other in ("val-leak", "label-leak", "ddp-metric")}
# A target network can only be seen to lag behind weights that move and stay finite: without a step there is no
# update to lag by, and weights a rate too high turned to NaN equal nothing.
CONFLICTS |= {frozenset({"target-sync", other}) for other in ("no-step", "lr-high", "detach-alias")}
CONFLICTS |= {frozenset({"detach-alias", other}) for other in ("no-step", "lr-high")}  # (and one probe sees both)
# Gradients wasted on the target network are told from the trained network's by the steps that apply the latter's:
# without a step neither side is trained.
CONFLICTS |= {frozenset({"target-grad", "no-step"})}
# Gradients reset before the step leave every step empty: what a missing step hides, this hides too; and it moves
# the very reset that zero-grad deletes.
CONFLICTS |= {frozenset({"zero-order", other}) for pair in list(CONFLICTS) if "no-step" in pair
              for other in pair - {"no-step"}}
CONFLICTS |= {frozenset({"zero-order", other}) for other in ("no-step", "zero-grad")}
# A sync written backwards is seen when it throws away updates (steps that apply nothing still count): none without
# a step, none recognisable once a rate too high turned the weights to NaN; it rewrites the very line target-sync
# unguards, and with a shallow copy the two modules are one (target-lag sees all three).
CONFLICTS |= {frozenset({"sync-reversed", other}) for other in ("no-step", "lr-high", "target-sync", "detach-alias")}


class TaskError(ValueError):
    """The request cannot be met (too many bugs for this reference and difficulty)."""


@dataclass
class Planted:
    bug: Bug
    site: str
    lines: list[int] = field(default_factory=list)  # 0-based lines of the task script this bug wrote
    removed_at: list[int] = field(default_factory=list)  # where it deleted lines (index of the next line)

    @property
    def points(self) -> list[int]:
        return self.lines + self.removed_at

    @property
    def anchor(self) -> int:
        return min(self.points)


@dataclass
class Task:
    reference: str
    seed: int
    difficulty: str | None
    description: str
    solution: str  # the disguised script without bugs
    script: str = ""  # the candidate's script
    planted: list[Planted] = field(default_factory=list)


def eligible(bug: Bug, reference: str, level: str | None) -> bool:
    """Whether ``bug`` is no harder than ``level`` on ``reference`` (as measured there, else the catalogue's)."""
    return level is None or LEVELS.index(difficulty(bug, reference)) <= LEVELS.index(level)


def generate(reference: str, source: str, n_bugs: int, seed: int, level: str | None = None,
             exclude: frozenset[str] = frozenset()) -> Task:
    """A task of ``n_bugs`` bugs planted into ``source`` disguised, drawn by ``seed``, none harder than ``level`` as
    measured on ``reference``; never one of ``exclude`` (bugs whose symptom an earlier draw's run did not show)."""
    rng = random.Random(f"interview:{seed}")
    description = rng.choice(DESCRIPTIONS.get(reference, ("A PyTorch training script.",)))
    clean = disguise(source, seed, description)
    task = Task(reference, seed, level, description, clean, clean)
    ctx = Context.of(clean)
    # A bug that makes the script raise would hide every other bug until fixed: tasks plant silent bugs only.
    candidates = [b for b in BUGS.values() if eligible(b, reference, level) and reference not in b.raises
                  and b.id not in exclude and sites(b, ctx)]
    rng.shuffle(candidates)
    if level is not None:  # the requested level first, then each level below it in turn
        candidates.sort(key=lambda b: LEVELS.index(level) - LEVELS.index(difficulty(b, reference)))
    most = draw(task, candidates, n_bugs, rng, ctx)
    if len(task.planted) < n_bugs:
        raise TaskError(f"only {most} compatible bugs apply to {reference}"
                        + (f" at difficulty {level}" if level else ""))
    return task


def draw(task: Task, candidates: list[Bug], n_bugs: int, rng: random.Random, ctx: Context, start: int = 0,
         budget: list[int] | None = None) -> int:
    """Plant ``n_bugs`` compatible bugs, each the first of ``candidates`` (from ``start``) that plants beside those
    before it; where the first choices leave too few (a small reference whose bugs hide one another), go back and
    try the next ones, at most MAX_PLANTS plants in all. Returns the most bugs planted together."""
    budget = [MAX_PLANTS] if budget is None else budget
    most = len(task.planted)
    for i in range(start, len(candidates)):
        if len(task.planted) == n_bugs or budget[0] <= 0:
            break
        bug = candidates[i]
        if any(frozenset({bug.id, p.bug.id}) in CONFLICTS for p in task.planted):
            continue
        saved = task.script, [replace(p, lines=list(p.lines), removed_at=list(p.removed_at)) for p in task.planted]
        state = rng.getstate()
        budget[0] -= 1
        if not plant(task, bug, rng, ctx):
            continue
        done = len(task.planted) == n_bugs
        most = max(most, draw(task, candidates, n_bugs, rng, ctx if done else Context.of(task.script), i + 1, budget))
        if len(task.planted) == n_bugs:
            return most
        task.script, task.planted = saved
        rng.setstate(state)
    return max(most, len(task.planted))


def plant(task: Task, bug: Bug, rng: random.Random, ctx: Context) -> bool:
    """Plant ``bug`` at the first site (in seeded order) that touches no line an earlier bug wrote.

    ``ctx`` is the analysis of ``task.script`` as it stands.
    """
    options = sites(bug, ctx)
    rng.shuffle(options)
    before = task.script.splitlines()
    for site in options:
        after = bug.operator.mutate(ctx, site).code
        moved = track(before, after.splitlines(), task.planted)
        if moved is None:
            continue
        compile(after, "train.py", "exec")
        task.planted = moved
        added, removed = changes(before, after.splitlines())
        task.planted.append(Planted(bug, site.id, added, removed))
        task.script = after
        return True
    return False


def changes(before: list[str], after: list[str]) -> tuple[list[int], list[int]]:
    """(lines of ``after`` that are new, positions in ``after`` where lines of ``before`` were dropped)."""
    added, removed = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op in ("replace", "insert"):
            added += range(j1, j2)
        if op == "delete":
            removed.append(j1)
    return added, removed


def track(before: list[str], after: list[str], planted: list[Planted]) -> list[Planted] | None:
    """Carry earlier bugs' lines over an edit; None when the edit touches one of them."""
    mapping: dict[int, int] = {}
    touched: list[tuple[int, int]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if op == "equal":
            mapping.update({i1 + k: j1 + k for k in range(i2 - i1)})
        else:
            touched.append((i1, i2))
    moved = []
    for p in planted:
        if any(i1 <= x < i2 or (i1 == i2 == x) for x in p.points for i1, i2 in touched):
            return None
        if any(x not in mapping and x < len(before) for x in p.lines):
            return None
        moved.append(Planted(p.bug, p.site, [mapping[x] for x in p.lines],
                             [mapping.get(x, len(after)) for x in p.removed_at]))
    return moved
