"""gradient-flow: every trained parameter that takes part in training receives gradient.

Rule ("use backprop to chart dependencies"): a parameter counts as taking part
when its module runs with gradients enabled during a training batch and an
optimizer holds it. Over the run, a hook on the parameter must see at least one
gradient contribution that is not all zeros. A ``.detach()`` or ``.data`` that
cuts a branch leaves the branch's parameters without any gradient; reconnecting
them with an auxiliary term multiplied by zero still gives them nothing.
"""
from __future__ import annotations

from collections import defaultdict

from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "gradient-flow"
TITLE = "gradient reaches every layer"


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self.grad_enabled = torch.is_grad_enabled
        self.reached: set[int] = set()
        self.ran: dict[int, dict[int, str]] = defaultdict(dict)  # loader -> {param id: owner name}
        self.modules_seen: dict[int, set[int]] = defaultdict(set)
        session.on("grad", ID, self.on_grad)
        session.on("module", ID, self.on_module)

    def on_grad(self, p, grad) -> None:
        if id(p) not in self.reached and bool(grad.ne(0).any()):
            self.reached.add(id(p))

    def on_module(self, module) -> None:
        current = self.session.current
        if current is None or not self.grad_enabled():
            return
        seen = self.modules_seen[current.loader]
        if id(module) in seen:
            return
        seen.add(id(module))
        for name, p in module.named_parameters(recurse=False):
            if p.requires_grad:
                self.ran[current.loader][id(p)] = f"{type(module).__name__}.{name}"

    def summary(self) -> dict:
        trained = {id(p) for p in self.session.trained_params()}
        train_loaders = self.session.training_loaders()
        ran = {pid: owner for loader in train_loaders for pid, owner in self.ran[loader].items() if pid in trained}
        starved = sorted(owner for pid, owner in ran.items() if pid not in self.reached)
        return {"took_part": len(ran), "starved": len(starved), "starved_params": starved}


def judge(obs: dict, facts: dict) -> Finding:
    took_part, starved = obs["took_part"], obs["starved"]
    if took_part == 0:
        return Finding(ID, TITLE, NOT_APPLICABLE, message="no trained parameter ran in a training batch")
    measured, threshold = f"{starved} of {took_part} tensors", "0"
    if starved:
        kinds = ", ".join(sorted(set(obs["starved_params"])))
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{starved} of {took_part} trained parameter tensors ran in training but never received "
                       f"gradient ({kinds})")
    return Finding(ID, TITLE, PASS, measured, threshold, "every trained parameter that ran received gradient")
