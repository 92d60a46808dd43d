"""target-grad: a loss's target carries no gradient into weights that nothing trains.

A loss compares a prediction with a target: a TD target ``r + gamma * max Q_target(s')``, a teacher's soft labels,
the output of a fixed random network (random network distillation), a frozen network's features. When that target
is computed with autograd on, the backward pass runs through the network that made it too and fills the ``.grad``
of its weights. Where no optimizer steps those weights, every such gradient is computed for nothing: the backward
does the target network's work as well as the trained one's, its forward keeps its activations until then, and
its ``.grad`` grows unread, update after update.

Observed. Every call of a loss function of ``torch.nn.functional`` (the ``nn`` loss modules call them) made with
autograd on and two floating-point tensors. When both carry gradient, the graph behind each is walked back to its
leaves (the weights its gradient reaches), at the first ``WALKS`` such calls and every ``EVERY``-th after: which
argument is the target does not matter (cleanrl writes ``F.mse_loss(td_target, old_val)``). A side is *trained*
when a step applied the gradient of a weight behind it: an optimizer holding the weight stepped after the first
loss that reached it (in a script that steps no optimizer, an update by hand counts: manual SGD; in one that does,
a change by hand of weights no optimizer holds is a sync or an average, ``load_state_dict`` or a Polyak update,
which applies no gradient). A side is *untrained* when no such step came; a side whose weights were all first
reached after the run's last update is undecided. Behind an untrained side facing a trained one, the weights a
backward pass gave a gradient are *unused*.

Rule (advice, never a failure: the training itself is unchanged, the cost is compute and memory):

* advice: unused weights, at least ``MIN_SHARE`` (5 %) as many as the trained side's: "each backward computed
  gradients for N weights no optimizer steps";
* pass: no loss had two sides carrying gradient, or both were trained (a consistency loss on purpose, VICReg's
  invariance term, mutual learning; a discriminator's features as a generator's target, the discriminator stepped
  by its own optimizer), or neither side was decided;
* not applicable: no loss function ran with autograd on and two tensors.

Measured: the ``rl`` reference computes its TD targets under ``torch.no_grad()``: none of its 569 losses' targets
carries gradient. Without it, every one of them does, into the target network's 2,596 weights (as many as the
Q-network's). Why a correct script does not advise: a target computed under ``no_grad``/``inference_mode``, detached,
or from a network frozen with ``requires_grad_(False)`` has no graph; a target network stepped by an optimizer of
its own, or a trained branch, is trained. Limits: a target computed from the trained network itself without
``no_grad`` (a Q-learner with no target network) is the same graph as a consistency loss that trains both sides on
purpose, and is not told apart (its gradient is applied); nor is a target network that an optimizer does hold
(random network distillation's target, put in the predictor's optimizer by mistake: it is then trained). A loss
written by hand (``((q - y) ** 2).mean()``, a cosine similarity, DINO's cross-entropy) is not a loss function call
and is not seen. Cost: at each loss call, two ``requires_grad`` checks; two graph walks at the first ``WALKS``
calls both of whose sides carry gradient and every ``EVERY``-th after; at each gradient, one lookup.
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS, Finding

ID = "target-grad"
TITLE = "a loss's target carries no gradient into untrained weights"
ADVISES = True  # wasted backward work and memory, not a wrong update: advice at most, the check still passes
SYMPTOM_ID, SYMPTOM = "unused-gradients", "gradients computed for weights that no optimizer steps"
WALKS, EVERY = 8, 64  # graph walks: the first calls both of whose sides carry gradient, then every EVERY-th
MAX_NODES = 100_000  # graph nodes visited per walk
MIN_SHARE = 0.05  # unused weights, as a share of the prediction's trained weights, from which it advises


@dataclass
class Observation:
    losses: int = 0  # loss calls with autograd on and two floating-point tensors
    carrying: int = 0  # ... both of whose arguments carried gradient
    unused_weights: int = 0  # elements of the weights behind a side of such a loss that nothing trains, while the
    unused_tensors: int = 0  # other side's weights are trained: a backward gave them gradients no step applied
    applied_weights: int = 0  # elements behind both sides where both are trained (a consistency loss)
    trained_weights: int = 0  # elements behind the trained side (the prediction)


class Observer:
    def __init__(self, session):
        import weakref

        import torch

        self.torch, self.ref = torch, weakref.ref
        self.obs = Observation()
        self.updates = 0
        self.leaves: dict[int, tuple] = {}  # id -> (weak reference, elements, update count when first reached)
        self.pairs: set[tuple[frozenset, frozenset]] = set()  # the leaves behind each side of a walked loss call
        self.graded: set[int] = set()  # walked leaves a backward gave a gradient
        self.holders: dict[int, set[int]] = {}  # parameter id -> ids of the optimizers given it
        self.last_step: dict[int, int] = {}  # optimizer id -> the update count after its last step
        self.by_hand: dict[int, int] = {}  # parameter id -> the update count after the last manual update of it
        session.on(Event.LOSS, ID, self.on_loss)
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.GROUP_ADDED, ID, self.on_group)
        session.on(Event.UPDATE_POST, ID, self.on_update)

    def on_group(self, optimizer, group) -> None:
        for p in group["params"]:
            self.holders.setdefault(id(p), set()).add(id(optimizer))

    def on_update(self, update) -> None:
        self.updates += 1
        if update.optimizer is not None:
            self.last_step[id(update.optimizer)] = self.updates
        else:
            for p in update.params:
                self.by_hand[id(p)] = self.updates

    def on_grad(self, p, grad) -> None:
        entry = self.leaves.get(id(p))
        if entry is not None and entry[0]() is p:
            self.graded.add(id(p))

    def on_loss(self, call) -> None:
        torch, sides = self.torch, (call.input, call.target)
        if not torch.is_grad_enabled() or not all(isinstance(t, torch.Tensor) and t.is_floating_point()
                                                  for t in sides):
            return
        self.obs.losses += 1
        if not all(t.requires_grad for t in sides):
            return
        self.obs.carrying += 1
        if self.obs.carrying <= WALKS or self.obs.carrying % EVERY == 0:
            first, second = (frozenset(self._note(t)) for t in sides)
            self.pairs.add((first, second))

    def _note(self, tensor) -> list[int]:
        keys = []
        for leaf in leaves(tensor):
            entry = self.leaves.get(id(leaf))
            if entry is None or entry[0]() is not leaf:
                self.leaves[id(leaf)] = (self.ref(leaf), leaf.numel(), self.updates)
            keys.append(id(leaf))
        return keys

    def trained(self, side: frozenset) -> bool | None:
        """Whether a step applied the gradient of a weight behind ``side`` after the weight was first reached: an
        optimizer holding it stepped, or (in a script that steps no optimizer: manual SGD) an update by hand changed
        it; in a script with optimizers, a change by hand of weights no optimizer holds is a sync or an average (a
        target network's ``load_state_dict``, a Polyak update), which applies no gradient. None: undecided, every
        weight behind it was first reached after the run's last update."""
        manual = not self.last_step
        decided = False
        for key in side:
            since = self.leaves[key][2]
            if since >= self.updates:
                continue
            decided = True
            if any(self.last_step.get(o, -1) > since for o in self.holders.get(key, ())) or \
                    manual and self.by_hand.get(key, -1) > since:
                return True
        return False if decided else None

    def summary(self) -> Observation:
        obs = self.obs
        unused, applied, trained = set(), set(), set()
        for first, second in self.pairs:
            a, b = self.trained(first), self.trained(second)
            if a and b:
                applied |= first | second
            elif a is True and b is False:
                unused, trained = unused | (second & self.graded), trained | first
            elif a is False and b is True:
                unused, trained = unused | (first & self.graded), trained | second
        unused -= applied | trained  # a weight behind a trained side too is trained
        obs.unused_weights, obs.unused_tensors = self.size(unused), len(unused)
        obs.applied_weights, obs.trained_weights = self.size(applied), self.size(trained)
        return obs

    def size(self, keys: set[int]) -> int:
        return sum(self.leaves[k][1] for k in keys)


def leaves(tensor) -> list:
    """The tensors that require grad at the leaves of the graph behind ``tensor`` (its gradient accumulators'
    variables, within ``MAX_NODES`` nodes), or ``tensor`` itself when it is one."""
    from checker.tensors import grad_leaves

    return grad_leaves(tensor, MAX_NODES, whole=False) or []


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.losses:
        why = "no loss function ran with autograd on and two tensors to compare"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    measured = f"{obs.unused_weights:,} weights"
    threshold = f"< {MIN_SHARE:.0%} of the trained weights"
    seen = (f"each backward computed gradients for {obs.unused_weights:,} weights ({obs.unused_tensors} tensors) that "
            f"no optimizer steps afterwards, beside the {obs.trained_weights:,} weights it trains "
            f"({obs.carrying} of {obs.losses} losses)")
    if obs.unused_weights and obs.unused_weights >= MIN_SHARE * obs.trained_weights:
        return Finding(ID, TITLE, ADVICE, measured, threshold,
                       f"{seen}: the loss's target was computed with autograd on, so the backward also runs through "
                       "the network that made it (a target network, a teacher, a fixed random network), keeps its "
                       "activations and fills a .grad that nothing reads. A target is a constant of its loss: compute "
                       "it under torch.no_grad(), .detach() it, or freeze that network with requires_grad_(False)",
                       observed=seen)
    if not obs.carrying:
        text = f"no loss of the {obs.losses} compared two tensors that both carried gradient"
    elif obs.unused_weights:
        text = (f"{obs.carrying} of {obs.losses} losses compared two tensors that both carried gradient, one side "
                f"into {obs.unused_weights:,} weights no optimizer steps: fewer than {MIN_SHARE:.0%} of the "
                f"{obs.trained_weights:,} trained")
    elif obs.applied_weights:
        text = (f"{obs.carrying} of {obs.losses} losses compared two tensors that both carried gradient, each side "
                f"into weights an optimizer steps ({obs.applied_weights:,}): both sides of the loss are trained")
    else:
        text = (f"{obs.carrying} of {obs.losses} losses compared two tensors that both carried gradient; no side was "
                "seen untrained beside a trained one")
    return Finding(ID, TITLE, PASS, measured, threshold, text, observed=text)
