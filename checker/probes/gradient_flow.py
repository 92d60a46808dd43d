"""gradient-flow: every trained parameter that takes part in training receives gradient.

Rule ("use backprop to chart dependencies"): a parameter takes part when its
module runs with gradients enabled inside a forward that is not evaluation (a
backward pass reached it, or it ran on a training loader's batch) and it is trained (an optimizer holds it, or it is updated by
hand). Over the run, a hook on the parameter must see at least one gradient
contribution that is not all zeros. A ``.detach()`` or ``.data`` that cuts a
branch leaves the branch's parameters without any gradient; reconnecting them
with an auxiliary term multiplied by zero still gives them nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "gradient-flow"
TITLE = "gradient reaches every layer"
SYMPTOM_ID, SYMPTOM = "gradient-reach", "gradient reaching parameters"


@dataclass
class Observation:
    took_part: int = 0
    starved: list[str] = field(default_factory=list)  # names of the starved parameters


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self.grad_enabled = torch.is_grad_enabled
        self.reached: set[int] = set()
        self.pending: dict[int, set[int]] = {}  # forward index -> ids of parameters that ran in it
        self.ran: set[int] = set()  # parameters that ran in a training forward
        self.seen: dict[int, set[int]] = {}  # forward index -> modules already read in it
        self.modules: set[int] = set()  # top-level modules whose parameters are named
        self.names: dict[int, tuple[int, str]] = {}  # parameter id -> (size of the model named from, "model.head.1.weight")
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.MODULE, ID, self.on_module)
        session.on(Event.FORWARD, ID, self.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    def on_grad(self, p, grad) -> None:
        if id(p) not in self.reached and bool(grad.ne(0).any()):
            self.reached.add(id(p))

    def on_module(self, module) -> None:
        forward = self.session.forward
        if forward is None or not self.grad_enabled():
            return
        seen = self.seen.setdefault(forward.index, set())
        if id(module) in seen:
            return
        seen.add(id(module))
        ids = self.pending.setdefault(forward.index, set())
        ids.update(id(p) for p in module._parameters.values() if p is not None and p.requires_grad)

    def on_update(self, update) -> None:
        self._settle()

    def _settle(self) -> None:
        """Forwards whose phase is known by now: a training one adds its parameters to those that ran."""
        for index, ids in self.pending.items():
            if self.session.phase(self.session.forwards[index]) != "eval":
                self.ran |= ids
        self.pending.clear()
        self.seen.clear()

    def summary(self) -> Observation:
        self._settle()
        trained = self.session.trained_ids()
        took_part = self.ran & trained
        starved = took_part - self.reached
        if starved:
            self.name_from_script_globals()
        return Observation(len(took_part), sorted(self.names.get(i, (0, "an unnamed parameter"))[1] for i in starved))

    def on_forward(self, forward) -> None:
        if forward.module in self.modules:
            return
        self.modules.add(forward.module)
        module = forward.ref()
        if module is not None:
            self.name_within(module, forward.name)

    def name_within(self, module, prefix: str, over_equals: bool = False) -> None:
        """Name ``module``'s parameters by their path in it, unless a bigger model that holds them named them."""
        named = list(module.named_parameters())
        for name, p in named:
            size = self.names.get(id(p), (0, ""))[0]
            if len(named) > size or (over_equals and len(named) == size):
                self.names[id(p)] = (len(named), f"{prefix}.{name}")

    def name_from_script_globals(self) -> None:
        """A model the script keeps in a global (``model``) names its parts as the script would: ``model.head.1.weight``,
        even when only a part of it (``model.head``) was ever called on its own."""
        import torch

        for variable, value in self.session.script_globals.items():
            if isinstance(value, torch.nn.Module) and not variable.startswith("_"):
                self.name_within(value, variable, over_equals=True)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    took_part, starved = obs.took_part, len(obs.starved)
    if took_part == 0:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no trained parameter ran in a training forward")
    measured, threshold = f"{starved} of {took_part} tensors", "0"
    if starved:
        shown = ", ".join(obs.starved[:6]) + (f" and {starved - 6} more" if starved > 6 else "")
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{starved} of {took_part} trained parameter tensors ran in training but never received "
                       f"gradient ({shown})")
    return Finding(ID, TITLE, PASS, measured, threshold, "every trained parameter that ran received gradient")
