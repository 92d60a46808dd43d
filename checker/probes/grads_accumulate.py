"""grads-accumulate: every update applies only gradients computed since that parameter's previous update.

Rule: each updated parameter is followed from update to update. Right after an
update, gradient still in ``.grad`` is old. It is cleared when a later gradient
contribution finds ``.grad`` ``None`` or all zeros (a reset happened before that
backward). At the next update, a parameter that a backward pass gave gradient since
its last update, whose old gradient was never cleared and whose ``.grad`` is not
zero, carries earlier steps' gradients into this one. A parameter no backward pass
reached since its last update had its gradient written by hand (a meta-gradient from
``torch.autograd.grad`` assigned to ``.grad``, Reptile's ``p.grad.zero_().add_(...)``,
a local model's gradients linked into a shared one): what it holds is not evidence
of accumulation, and it is not judged; neither are the gradients the hooks see while
``torch.autograd.grad`` runs, which reach no ``.grad``.
Zeroing before or after the step, ``set_to_none=False``, ``model.zero_grad()``,
``p.grad = None``, k-step accumulation and a GAN whose generator's backward
leaves gradients in the discriminator that ``netD.zero_grad()`` clears before
the discriminator's next update all pass; lowering the learning rate, clipping
or rescaling the loss do not. Manual updates (no ``torch.optim``) count as updates in a run without
optimizers; beside one, parameters changed by hand are an EMA or a target network's soft update, which applies no
gradient, and are not judged.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "grads-accumulate"
TITLE = "gradients reset between steps"
SYMPTOM_ID, SYMPTOM = "update-gradient", "gradient applied at each update"


@dataclass
class Observation:
    updates: int = 0
    stale_updates: int = 0
    stale_params_per_update: list[int] = field(default_factory=list)


class Observer:
    def __init__(self, session):
        self.session = session
        self.old: set[int] = set()  # parameters whose .grad still holds gradient from before their last update
        self.reached: set[int] = set()  # parameters a backward pass gave gradient since their last update
        self.obs = Observation()
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.UPDATE_PRE, ID, self.on_update_pre)
        session.on(Event.UPDATE_POST, ID, self.on_update_post)

    def on_grad(self, p, grad) -> None:
        from checker.tensors import any_nonzero

        if self.session.autograd_grads:  # torch.autograd.grad: its gradients are returned, not added to .grad
            return
        self.reached.add(id(p))
        if id(p) in self.old and (p.grad is None or not any_nonzero(p.grad)):
            self.old.discard(id(p))

    def judged(self, update) -> bool:
        """Manual updates are judged only in a run without optimizers: beside one, parameters changed by hand are
        an EMA or target network's copy (a soft update), which applies no gradient at all."""
        return not update.manual or not self.session.optimizers

    def on_update_pre(self, update) -> None:
        from checker.tensors import any_nonzero

        params = [p for p in update.params if id(p) in self.reached]
        if not self.judged(update) or not params:
            return
        stale = sum(1 for p in params if id(p) in self.old and p.grad is not None and any_nonzero(p.grad))
        self.obs.updates += 1
        self.obs.stale_updates += stale > 0
        self.obs.stale_params_per_update.append(stale)

    def on_update_post(self, update) -> None:
        if not self.judged(update):
            return
        for p in update.params:  # zeros are told apart later, only where it matters
            self.reached.discard(id(p))
            if p.grad is not None:
                self.old.add(id(p))
            else:
                self.old.discard(id(p))

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    updates, stale = obs.updates, obs.stale_updates
    series = {"parameters whose applied gradient was not this step's, per update": obs.stale_params_per_update}
    if updates < 2:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="fewer than two updates were observed")
    measured, threshold = f"{stale} of {updates} updates", "0"
    if stale:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"updates at {stale} of {updates} steps also carried gradients left over from earlier steps",
                       series, observed=f"the gradient applied at {stale} of {updates} updates was not the gradient "
                                        "of that step's loss alone")
    return Finding(ID, TITLE, PASS, measured, threshold, "every update used only its own step's gradients", series)
