"""eval-mode: evaluation runs with dropout off and batch-norm frozen.

Rule: in every evaluation forward (see :mod:`checker.session`: run without
gradients or never reached by a backward pass, and not feeding training) no
dropout may be applied and no batch-norm may use batch statistics or update its
running statistics. ``model.eval()``, ``model.train(False)`` and per-module
``eval()`` pass. Not applicable when no dropout or batch-norm runs in an
evaluation forward, or no evaluation ran.

Harm. Evaluation forwards are grouped into runs (no forward of another phase
between them, in one DataLoader pass or outside any, cut where a forward in
training behaviour follows one in evaluation behaviour: a mean teacher run in train
mode right after a validation over sliced tensors is not part of it). A run is *generation* when at least a quarter of its forwards are
chained, taking an earlier forward's output as input or giving theirs to a later
one (a recurrent state carried from step to step, a decoder fed by its encoder:
text sampled from the model, a translation decoded), or every forward of it ran
on one sample (a prompt, a starting letter: sampling one step at a time),
no loss function was called on its outputs and none of its forwards ran on a
labelled DataLoader batch. A run is also generation when no loss took its outputs
and every model in it is one whose outputs no loss ever took directly, while losses
were computed on other models' outputs: a GAN's generator, an encoder, whose outputs
only feed another model in training, run on their own (a grid of samples from fixed
noise, drawn inside the training loop). Every other run is taken as a validation,
whose loss or accuracy dropout and batch statistics make noisy and biased: dropout
or batch statistics there fail. In generation no measured result is harmed, and the
randomness may be meant (a char-RNN that samples with dropout on for variety):
advice.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.mode_ledger import blocks

ID = "eval-mode"
TITLE = "validation in eval mode"
SYMPTOM_ID, SYMPTOM = "eval-repeatability", "repeatable evaluation"


@dataclass
class Observation:
    forwards: int = 0  # evaluation forwards that ran dropout or batch-norm
    active: int = 0  # ... with either in training behaviour, in scored runs (a loss or labels judged their outputs)
    active_per_pass: list[int] = field(default_factory=list)
    unscored: int = 0  # ... with either in training behaviour, in generation (see the module docstring), nothing scored


class Observer:
    def __init__(self, session):
        self.session = session
        self.scored: set[int] = set()  # indices of forwards whose outputs a loss took, or that ran on labelled batches
        self.losses: set[int] = set()  # serials (``Forward.module``) of the models whose outputs a loss took
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.LOSS, ID, self.on_loss)

    def on_forward(self, forward) -> None:
        if forward.pass_index is not None and self.session.labels is not None:
            self.scored.add(forward.index)

    def on_loss(self, call) -> None:
        if call.forward is not None:
            self.losses.add(self.session.forwards[call.forward].module)
            self.scored.add(call.forward)

    def summary(self) -> Observation:
        runs = [part for run in blocks(self.session, "eval") for part in by_pass(run)]
        judged = [not self.feeders_only(run) and (any(f.index in self.scored for f in run) or not generation(run))
                  for run in runs]
        per_pass = [sum("active" in f.modes for f in run) for run, scored in zip(runs, judged) if scored]
        unscored = sum("active" in f.modes for run, scored in zip(runs, judged) if not scored for f in run)
        return Observation(sum(len(run) for run in runs), sum(per_pass), per_pass, unscored)


    def feeders_only(self, run: list) -> bool:
        """Whether losses were computed, no loss took this run's outputs, and no loss ever took an output of a
        model in it directly (a GAN's generator, an encoder: its outputs only feed another model)."""
        return bool(self.losses) and all(f.module not in self.losses for f in run)


def by_pass(run: list) -> list[list]:
    """A run of evaluation forwards cut where the DataLoader pass they ran in changes (a validation pass, then
    sampling outside any pass), and where a model in evaluation behaviour gives way to one in training behaviour (a
    validation in eval mode, then a mean teacher run in train mode on purpose at the next step: without a DataLoader
    nothing else separates them)."""
    parts: list[list] = []
    for f in run:
        if not parts or parts[-1][-1].pass_index != f.pass_index or \
                ("active" in f.modes and "active" not in parts[-1][-1].modes):
            parts.append([])
        parts[-1].append(f)
    return parts


def generation(run: list) -> bool:
    """Whether a run of evaluation forwards looks like sampling or decoding: a quarter of them chained (taking an
    earlier one's output as input, or giving theirs to a later one), or each on a single sample."""
    fed = {i for f in run for i in f.fed}
    chained = sum(bool(f.fed) or f.index in fed for f in run)
    return 4 * chained >= len(run) or all(f.batch is not None and f.batch <= 1 for f in run)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.forwards:
        message = ("no evaluation was observed" if not facts.eval_forwards else
                   "no dropout or batch-norm layer ran during evaluation")
        observed = "no evaluation was observed" if not facts.eval_forwards else "nothing in evaluation can vary"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=message, observed=observed)
    series = {"forwards that depend on chance or on their batch, per validation pass": obs.active_per_pass}
    measured, threshold = f"{obs.active} of {obs.forwards} forwards", "0"
    if obs.active:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"dropout or batch-norm behaved as in training in {obs.active} of {obs.forwards} "
                       "evaluation forwards", series,
                       observed=f"{obs.active} of {obs.forwards} evaluation forwards depended on the random state or on "
                                "the other samples of their batch: two evaluations of the same weights can disagree")
    if obs.unscored:
        seen = (f"dropout or batch-norm behaved as in training in {obs.unscored} of {obs.forwards} evaluation forwards, "
                "generating (chained output to input, one sample at a time, or a model whose outputs only ever "
                "fed another model, run on its own), whose outputs no loss or label scored")
        return Finding(ID, TITLE, ADVICE, f"{obs.unscored} of {obs.forwards} forwards", threshold,
                       f"{seen} (sampling, decoding): no measured result depends on them, and randomness "
                       "while sampling may be meant; if it is not, call model.eval() before them", series,
                       observed=f"{seen}: the same input can give different outputs")
    return Finding(ID, TITLE, PASS, measured, threshold, "evaluation ran with dropout off and batch-norm frozen", series,
                   observed="every evaluation forward was repeatable")
