"""eval-no-grad: validation runs without autograd: its forwards build no graph.

Rule: a top-level forward *built a graph* when it ran with grad mode enabled and
one of its outputs requires grad. That is read at the forward itself, so
detaching only the final value (``model(x).detach()``, ``.item()``, ``del out``,
``gc.collect()``) does not hide it: the graph, and the activations it saves, were
built all the same. ``torch.no_grad()``, ``torch.inference_mode()`` (as a block or
a decorator), ``torch.set_grad_enabled(False)`` and a model whose parameters do not
require grad (an EMA copy, a frozen teacher) build none.

Which forwards count: only evaluation forwards (see :mod:`checker.session`: no
backward reached their output and they fed no training forward) recognisable as
*validation*:

* forwards on batches of a DataLoader that never trained (a validation loader), or
* forwards outside any DataLoader pass (batches sliced from tensors) of a model
  that runs with dropout or batch-norm switched off (evaluation behaviour) and
  trains again afterwards (validation between training steps). A model without
  either layer cannot show evaluation behaviour, and the last validation after
  training is not followed by training: neither is counted this way.

Other evaluation forwards that built a graph are the same waste where the run cannot
tell them apart from validation (a distillation teacher or an RL target network
whose output is detached, a rollout that picks actions, features extracted for a
later stage, the last forward before an early exit, a final test after training,
validation on sliced tensors of a model without dropout or batch-norm): the probe
advises on them too, naming them as other evaluation forwards. A forward with
gradients on a batch of a *training* loader has no phase at all (a skipped loss
looks the same), so validation on sliced tensors in the middle of a training
loader's pass is not seen.

A graph that no backward pass uses costs time and memory, but it does not change
any result: the probe never fails, it advises (the check passes; a kata whose bug
this is stays unsolved while the advice stands).

* advice: at least one evaluation forward built a graph (validation first, then
  the others);
* pass: no evaluation forward built one;
* n/a: no evaluation forward ran.

Cost: one check of the outputs' ``requires_grad`` per top-level forward run with
grad mode on; phases are read once, at the end.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS, Finding

ID = "eval-no-grad"
TITLE = "evaluation without autograd"
SYMPTOM_ID, SYMPTOM = "eval-graphs", "graphs built while evaluating"
ADVISES = True  # a graph nobody backpropagates costs time and memory, but the results are the same: advice


@dataclass
class Observation:
    evaluations: int = 0  # evaluation forwards
    validation: int = 0  # ... recognisable as validation
    built: int = 0  # validation forwards that built a graph
    other_built: int = 0  # other evaluation forwards that built a graph
    built_per_pass: list[int] = field(default_factory=list)  # per run of validation forwards


class Observer:
    def __init__(self, session):
        self.session = session
        self.built: set[int] = set()  # indices of forwards that built a graph
        session.on(Event.FORWARD_END, ID, self.on_forward_end)

    def on_forward_end(self, forward, output) -> None:
        if forward.grad:
            from checker.tensors import tensors_in

            if any(t.requires_grad for t in tensors_in(output)):
                self.built.add(forward.index)

    def summary(self) -> Observation:
        session = self.session
        phases = [session.phase(f) for f in session.forwards]
        last_trained: dict[int, int] = {}  # module id -> index of its last training forward
        for f, phase in zip(session.forwards, phases):
            if phase == "train":
                last_trained[f.module] = f.index
        obs = Observation()
        previous = None
        for f, phase in zip(session.forwards, phases):
            if phase == "train":
                previous = "train"
            if phase != "eval":
                continue
            obs.evaluations += 1
            built = f.index in self.built and not f.reached  # a backward used it: an attack's input gradient
            if not validation(session, f, last_trained):
                obs.other_built += built
                continue
            obs.validation += 1
            obs.built += built
            if previous != "validation" or not obs.built_per_pass:
                obs.built_per_pass.append(0)
            obs.built_per_pass[-1] += built
            previous = "validation"
        return obs


def validation(session, forward, last_trained: dict[int, int]) -> bool:
    """Whether an evaluation forward is recognisably validation (see the module docstring)."""
    if forward.pass_index is not None:
        return session.role(forward.pass_index) == "eval"
    evaluating = "inactive" in forward.modes and "active" not in forward.modes
    return evaluating and last_trained.get(forward.module, -1) > forward.index


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.evaluations:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no evaluation was observed")
    series = {"forwards that built a graph, per validation pass": obs.built_per_pass} if obs.built_per_pass else {}
    if obs.built:
        measured = f"{obs.built} of {obs.validation} forwards"
        other = (f"; so did {obs.other_built} other evaluation forwards (a teacher, a target network, a final test?)"
                 if obs.other_built else "")
        return Finding(ID, TITLE, ADVICE, measured, "0",
                       f"{obs.built} of {obs.validation} validation forwards ran with gradients enabled and built "
                       f"autograd graphs that no backward pass uses{other}: validation is not under torch.no_grad() "
                       "or torch.inference_mode(), which spends time and memory on every batch (the results are the "
                       "same)", series,
                       observed=f"{obs.built} of {obs.validation} validation forwards built autograd graphs that "
                                "nothing used: time and memory spent on every validation batch")
    if obs.other_built:
        return Finding(ID, TITLE, ADVICE, f"{obs.other_built} of {obs.evaluations} forwards", "0",
                       f"{obs.other_built} of {obs.evaluations} evaluation forwards (whose output no backward pass "
                       "used: a teacher, a target network, a test after training, a validation on sliced tensors) ran "
                       "with gradients enabled and built autograd graphs: run them under torch.no_grad() to save the "
                       "time and memory",
                       observed=f"{obs.other_built} of {obs.evaluations} forwards whose output no backward pass used "
                                "built autograd graphs")
    if obs.validation:
        return Finding(ID, TITLE, PASS, f"0 of {obs.validation} forwards", "0",
                       "no validation forward built an autograd graph", series,
                       observed=f"none of {obs.validation} validation forwards built an autograd graph")
    return Finding(ID, TITLE, PASS, f"0 of {obs.evaluations} forwards", "0",
                   "no evaluation forward built an autograd graph",
                   observed=f"none of {obs.evaluations} evaluation forwards built an autograd graph")
