"""weights-update: the gradients that backward passes compute are applied to the weights.

Rule: a parameter is *graded* once a backward pass delivers a gradient to it; its
values (a fingerprint: the norm and the float64 sum) are noted at that first gradient. It is *applied*
once an update that holds it (an optimizer step, or a manual update, see
:mod:`checker.params`) left it with values other than those, or, for a change the
session cannot attribute to an update (a hand-written update of parameters an
optimizer also holds), once its values at the end of the run differ. The
trained-looking parameters are the graded ones an optimizer holds, grouped by
optimizer; when no optimizer holds any, all graded parameters (a manual update
is then expected).

* fail: backward passes computed gradients, and not one trained-looking group's
  parameters ever changed: no optimizer step and no manual update ("0 updates
  after 64 backward passes"), or steps that changed nothing (the gradient reset
  before the step, a learning rate of 0; another optimizer stepping). A
  GradScaler that skipped every step is said so.
* fail, too: one optimizer's graded parameters never changed although they
  received gradients over at least ``MIN_SPAN`` backward passes during which no
  update of any kind happened (a stage of a multi-stage script, a teacher's
  pre-training or a linear probe, that never steps).
* fail, too: an optimizer that never stepped while it holds parameters that
  received gradients and other parameters were updated (a seq2seq encoder's
  optimizer built beside the decoder's, a GAN's generator's beside its
  discriminator's): building an optimizer over parameters declares that they train.
* fail, too: an optimizer that stepped, whose graded parameters never changed while
  other parameters were updated, and each of whose steps found the gradients that
  backward passes gave them since its previous step already reset (None or zeros):
  the script computed them and threw them away before its own step (an actor-critic
  or a GAN whose one ``zero_grad()`` runs between that network's backward and step).
* cannot tell: an optimizer that did step, with the gradients there, but whose graded
  parameters never changed while other parameters were updated (a learning rate of 0
  in every group): a part deliberately held still for this run cannot be told from
  one that was meant to train.
* pass: every group's gradients were applied at least once. Gradient accumulation
  (few updates per many backward passes), a GradScaler skipping a few steps,
  manual SGD, two optimizers taking turns, a warm-up whose first rate is 0 (the
  values are compared until a change is seen, not only after the first update),
  and evaluation or input-gradient sections after training all pass.
* n/a: no backward pass delivered a gradient to a parameter.

Graded parameters no optimizer holds, while others are held (a frozen feature
extractor left with ``requires_grad``), are not trained-looking and are ignored.
A script with backward passes but no update reaches the judges (``checker.verdict``
stops early only when there was neither), so this probe, not a "no training"
error, reports it. Cost per gradient contribution: a dict store and a set lookup;
per backward pass: one list append; per update, until each parameter is seen to
change: one norm of the parameters still waiting.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "weights-update"
TITLE = "gradients are applied"
SYMPTOM_ID, SYMPTOM = "weights-change", "weights after each step"
MIN_SPAN = 2


@dataclass
class Observation:
    backwards: int = 0  # backward passes that delivered a gradient to at least one parameter
    groups: list[dict] = field(default_factory=list)  # per optimizer holding graded parameters:
    # {"optimizer": class name, "params": graded, "applied": graded seen changed, "steps": its steps,
    #  "span": backward passes from the first to the last that graded them, "quiet": no update at all in that span}
    unheld: int = 0  # graded parameters no optimizer holds
    unheld_applied: int = 0
    manual_updates: int = 0


class Observer:
    def __init__(self, session):
        self.session = session
        self.backward = 0
        self.last_graded = -1
        self.graded_backwards = 0
        self.first: dict[int, tuple[weakref.ref, float, int]] = {}  # param id -> (ref, norm and backward at its
        # first gradient)
        self.last: dict[int, int] = {}  # param id -> the last backward that graded it
        self.updates_at: list[int] = [0]  # updates made before each backward pass started
        self.pending: set[int] = set()  # graded, not yet seen changed
        self.applied: set[int] = set()
        self.steps: dict[int, int] = {}  # optimizer id -> steps
        self.manual = 0
        session.on(Event.BACKWARD, ID, self.on_backward)
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.UPDATE_POST, ID, self.on_update)
        session.on(Event.UPDATE_PRE, ID, self.on_step)
        self.zero_steps: dict[int, int] = {}  # optimizer id -> its steps whose waiting parameters' gradients were all 0
        self.stepped_at: dict[int, int] = {}  # optimizer id -> backward passes run before its last step
        self.reset_steps: dict[int, int] = {}  # optimizer id -> its steps that found the gradients its waiting
        # parameters received since its previous step reset (None or all 0)

    def on_step(self, update) -> None:
        """Before a step that still has parameters waiting to change: are all their gradients zero? And were the
        gradients that backward passes gave them since this optimizer's previous step reset before this one?"""
        if update.manual or not self.pending:
            return
        from checker.tensors import any_nonzero

        key = id(update.optimizer)
        previous, self.stepped_at[key] = self.stepped_at.get(key, 0), self.backward
        waiting = [p for p in update.params if id(p) in self.pending and p.grad is not None]
        if waiting and not any(any_nonzero(p.grad) for p in waiting):
            self.zero_steps[key] = self.zero_steps.get(key, 0) + 1
        fresh = [p for p in update.params if id(p) in self.pending and self.last.get(id(p), 0) > previous]
        if fresh and all(p.grad is None or not any_nonzero(p.grad) for p in fresh):
            self.reset_steps[key] = self.reset_steps.get(key, 0) + 1

    def on_backward(self, loss) -> None:
        self.backward += 1
        self.updates_at.append(self.session.updates)

    def on_grad(self, p, grad) -> None:
        if self.last_graded != self.backward:
            self.last_graded = self.backward
            self.graded_backwards += 1
        self.last[id(p)] = self.backward
        seen = self.first.get(id(p))
        if seen is None or seen[0]() is not p:  # new, or a new parameter where a freed one lived
            from checker.params import fingerprint

            self.first[id(p)] = (weakref.ref(p), fingerprint(p), self.backward)
            self.pending.add(id(p))
            self.applied.discard(id(p))

    def on_update(self, update) -> None:
        if update.manual:
            self.manual += 1
            self._applied([id(p) for p in update.params if id(p) in self.pending])
            return
        key = id(update.optimizer)
        self.steps[key] = self.steps.get(key, 0) + 1
        if self.pending:
            self._compare([p for p in update.params if id(p) in self.pending])

    def _applied(self, ids) -> None:
        for pid in ids:
            self.pending.discard(pid)
            self.applied.add(pid)

    def _compare(self, params) -> None:
        """Mark as applied the parameters whose values differ from those at their first gradient."""
        if not params:
            return
        from checker.params import fingerprints, same

        norms = fingerprints(params)
        self._applied([id(p) for p, norm in zip(params, norms) if not same(norm, self.first[id(p)][1])])

    def summary(self) -> Observation:
        self._compare([p for pid in list(self.pending) if (p := self.first[pid][0]()) is not None])
        graded, held = set(self.first), set()
        groups = []
        for opt in self.session.optimizers:
            ids = {id(p) for group in opt.param_groups for p in group["params"]}
            held |= ids
            mine = ids & graded
            if mine:
                start, end = min(self.first[i][2] for i in mine), max(self.last[i] for i in mine)
                after = self.updates_at[end + 1] if end + 1 < len(self.updates_at) else self.session.updates
                groups.append({"optimizer": type(opt).__name__, "params": len(mine),
                               "applied": len(mine & self.applied), "steps": self.steps.get(id(opt), 0),
                               "span": end - start + 1, "quiet": after == self.updates_at[start],
                               "zero_steps": self.zero_steps.get(id(opt), 0),
                               "reset_steps": self.reset_steps.get(id(opt), 0)})
        unheld = graded - held
        return Observation(self.graded_backwards, groups, len(unheld), len(unheld & self.applied), self.manual)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.backwards:
        message = ("no backward pass ran" if not facts.backwards else
                   "no backward pass delivered a gradient to a parameter")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=message)
    groups = obs.groups or [{"optimizer": "by hand", "params": obs.unheld, "applied": obs.unheld_applied,
                             "steps": obs.manual_updates}]
    updates = sum(g["steps"] for g in groups) + (obs.manual_updates if obs.groups else 0)
    stalled = [g for g in groups if not g["applied"]]
    measured, threshold = f"{updates} updates after {obs.backwards} backward passes", "weights change"
    if len(stalled) == len(groups):
        observed = (f"the weights stayed exactly as they were through {obs.backwards} backward passes that "
                    f"computed gradients")
        if not updates:
            message = (f"no optimizer step or manual update applied the gradients of {obs.backwards} backward "
                       "passes: the weights never changed")
            if facts.scaler_skips:
                message += f" (a GradScaler skipped all {facts.scaler_skips} steps for non-finite gradients)"
        elif all(g.get("zero_steps", 0) >= g["steps"] for g in groups if g["steps"]):
            message = (f"{updates} optimizer steps ran, but the gradients they applied were all exactly 0: the loss "
                       "does not depend on these parameters where it is computed (a cross-entropy over a single "
                       "output is always 0), or the gradients were reset between the backward pass and the step")
            observed += f" and {updates} updates, whose gradients were all 0"
        else:
            message = (f"{updates} optimizer steps ran, but none changed the parameters that received gradients: "
                       "the gradients were gone at the step (reset between backward and step), the learning rate "
                       "was 0, or the steps made no change for another reason of the optimizer's settings")
            observed += f" and {updates} updates"
        return Finding(ID, TITLE, FAIL, measured, threshold, message, observed=observed)
    quiet = [g for g in stalled if g.get("quiet") and g.get("span", 0) >= MIN_SPAN]
    if quiet:
        g = max(quiet, key=lambda g: g["span"])
        return Finding(ID, TITLE, FAIL, f"0 updates after {g['span']} backward passes", threshold,
                       f"the {g['optimizer']} optimizer's {g['params']} parameters received gradients over "
                       f"{g['span']} backward passes, and no update of any kind followed: they never changed "
                       f"({g['steps']} steps of that optimizer)",
                       observed=f"{g['params']} parameters received gradients over {g['span']} backward passes "
                                "and stayed exactly as they were, while nothing else changed either")
    idle = [g for g in stalled if not g["steps"] and g.get("span", 0) >= MIN_SPAN]
    if idle:
        g = max(idle, key=lambda g: g["params"])
        return Finding(ID, TITLE, FAIL, f"0 steps of {g['optimizer']}", threshold,
                       f"the {g['optimizer']} optimizer built over {g['params']} parameters that received gradients "
                       f"over {g['span']} backward passes never stepped: they never changed, while other "
                       "parameters trained. Building an optimizer over them declares they train: call its step() "
                       "(or leave them out of it, and freeze them, if they are meant to stay)",
                       observed=f"{g['params']} parameters received gradients over {g['span']} backward passes and "
                                "stayed exactly as they were, while others changed")
    emptied = [g for g in stalled if g["steps"] and g.get("reset_steps", 0) >= g["steps"]]
    if emptied:
        g = max(emptied, key=lambda g: g["steps"])
        return Finding(ID, TITLE, FAIL, f"{g['steps']} empty steps of {g['optimizer']}", threshold,
                       f"each of the {g['steps']} steps of the {g['optimizer']} optimizer found the gradients that "
                       f"backward passes had just given its {g['params']} parameters already reset: they never "
                       "changed, while other parameters trained. The reset runs between backward() and step(): move "
                       "zero_grad() before the forward pass, or after the step",
                       observed=f"{g['params']} parameters received gradients before each of {g['steps']} steps of "
                                "their optimizer and stayed exactly as they were, while others changed")
    if stalled:
        names = ", ".join(f"{g['optimizer']} ({g['params']} parameters, {g['steps']} steps)" for g in stalled)
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                       f"the parameters of {names} received gradients but never changed, while other parameters "
                       "trained: a part frozen for this run on purpose, or an optimizer that never steps",
                       observed="some parameters received gradients but never changed, while others did")
    per = obs.backwards / updates if updates else 0
    note = f" ({per:.3g} backward passes per update)" if per > 1.5 else ""
    return Finding(ID, TITLE, PASS, measured, threshold,
                   f"the gradients were applied: {updates} updates after {obs.backwards} backward passes{note}",
                   observed=f"the weights changed: {updates} updates after {obs.backwards} backward passes")
