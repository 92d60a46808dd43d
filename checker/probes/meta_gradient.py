"""meta-gradient: a meta-gradient differentiates through the inner steps it was taken after.

MAML adapts fast weights with a few gradient steps, ``fast = p - lr * g`` where ``g`` comes from
``torch.autograd.grad(inner_loss, params, create_graph=True)``, and trains ``p`` on the loss of the adapted
model. The meta-gradient is then ``(I - lr H) ∇L(fast)``: the inner step's slope (the Hessian ``H`` of the inner
loss) is part of it. Taken without ``create_graph`` (or detached afterwards) ``g`` is a constant: the
meta-gradient keeps only ``∇L(fast)``, first-order MAML. That is a known approximation when chosen, and a
silent loss of the second-order term when ``create_graph=True`` was meant, so this probe advises and never fails.

Rule: a ``torch.autograd.grad`` call with respect to parameters an optimizer trains (or to fast weights made
from them by sums, differences and copies: ``p.clone()``, as ``higher`` and ``learn2learn`` make them) opens a window; the next backward pass walks its graph (the first 32 windows,
then one in 16) for the steps that move what the gradient was taken with respect to: a sum or difference of two
operands, one of them that tensor. A step whose other operand carries no gradient is constant. A window whose
steps (at least half of its inputs moved) are all constant is a first-order one:

* advice: some window is first-order (measured: how many of the windows walked);
* pass: every inner step found carries its gradient (the reference's second-order MAML);
* not applicable: no gradient taken with ``torch.autograd.grad`` with respect to trained parameters, or none
  of them moved by a step that a backward pass then reached (a gradient penalty on the inputs, a gradient norm
  for logging, weights updated by the optimizer).

Measured: the ``meta`` reference (create_graph=True): every inner step carries its gradient, 0 first-order
windows; with ``create_graph=False``: every window first-order. Limits: a learned per-parameter inner rate
(Meta-SGD) makes the step a product first, which is not followed; fast weights made in a deep-copied model
(``copy.deepcopy`` per task, no graph back to the parameters) are not seen; a script that adds a constant to a
parameter it took ``autograd.grad`` of in the same iteration (a ``1 + weight`` parametrisation) would count as
a constant step. Cost: none where the script never calls ``torch.autograd.grad`` on trained parameters; else a
walk of the backward graph per sampled window.
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.fast_weights import OWNER, STEP_NODES, Roots, TrainedParams, root_param

ID = "meta-gradient"
TITLE = "meta-gradient through the inner steps"
SYMPTOM_ID, SYMPTOM = "inner-step-slope", "what each meta-update's gradient sees of the adaptation"
ADVISES = True  # first-order MAML is an approximation some choose: advice, never a failure
FIRST_WINDOWS, EVERY = 32, 16  # windows walked: the first ones, then one in EVERY
MAX_NODES = 200_000  # nodes walked per graph
USES = (OWNER,)


@dataclass
class Observation:
    windows: int = 0  # autograd.grad calls on trained tensors followed by a backward pass
    walked: int = 0  # ... whose backward graph was walked
    stepped: int = 0  # walked windows in which inner steps were found
    first_order: int = 0  # ... all of whose steps were constant
    steps: int = 0  # inner steps found
    constant: int = 0  # ... whose other operand carried no gradient


class Observer:
    def __init__(self, session):
        self.obs = Observation()
        self.trained = session.shared(TrainedParams)
        self.window: dict[int, object] = {}  # id -> a trained parameter the window's gradients were taken of
        session.on(Event.AUTOGRAD_GRAD, ID, self.on_grad)
        session.on(Event.BACKWARD, ID, self.on_backward)
        session.on(Event.UPDATE_POST, ID, self.close)

    def on_grad(self, inputs, grads) -> None:
        for tensor, grad in zip(inputs, grads):
            if grad is None or not getattr(tensor, "requires_grad", False):
                continue
            param = root_param(tensor, self.trained, copies=True)
            if param is not None:
                self.window[id(param)] = param

    def on_backward(self, tensor) -> None:
        if not self.window or getattr(tensor, "grad_fn", None) is None:
            return
        self.obs.windows += 1
        if self.obs.windows <= FIRST_WINDOWS or self.obs.windows % EVERY == 0:
            self.walk(tensor.grad_fn)
        self.close()

    def walk(self, root) -> None:
        """Count the steps in ``root``'s graph that move a window's parameter (or a fast weight made from it)."""
        self.obs.walked += 1
        roots = Roots(lambda v: id(v) in self.window, copies=True)
        moved: set[int] = set()
        reached: set[int] = set()  # the window's parameters the backward pass reaches
        steps = constant = 0
        seen, stack = {id(root)}, [root]
        while stack and len(seen) < MAX_NODES:
            node = stack.pop()
            edges = node.next_functions
            if node.name() in STEP_NODES and len(edges) == 2:
                for mine, other in (edges, edges[::-1]):
                    param = roots.of(mine[0])
                    if param is not None:
                        moved.add(id(param))
                        steps += 1
                        constant += other[0] is None
                        break
            for child, _ in edges:
                if child is not None and id(child) not in seen:
                    seen.add(id(child))
                    stack.append(child)
                    variable = getattr(child, "variable", None)
                    if variable is not None and id(variable) in self.window:
                        reached.add(id(variable))
        if not steps or 2 * len(moved) < len(reached):
            return
        self.obs.stepped += 1
        self.obs.steps += steps
        self.obs.constant += constant
        self.obs.first_order += constant == steps

    def close(self, *args) -> None:
        self.window.clear()

    def summary(self) -> Observation:
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.stepped:
        why = ("no inner step: no gradient taken with torch.autograd.grad with respect to trained parameters moved "
               "them (or fast weights made from them) into a loss that was backpropagated")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    measured = f"{obs.first_order} of {obs.stepped} meta-updates"
    if obs.first_order:
        return Finding(ID, TITLE, ADVICE, measured, "0",
                       f"in {obs.first_order} of {obs.stepped} meta-updates checked, every inner step "
                       f"({obs.constant} of {obs.steps}) moved the weights by a gradient that carries no graph: "
                       "torch.autograd.grad ran without create_graph=True (or its result was detached), so the "
                       "meta-gradient treats the inner steps as constants and drops their second-order term "
                       "(first-order MAML). If that is the approximation you chose, this is fine; if not, pass "
                       "create_graph=True when adapting for the meta-update",
                       observed=f"in {obs.first_order} of {obs.stepped} meta-updates checked the adapted weights "
                                "moved by steps that carry no gradient: the update does not see how the adaptation "
                                "depends on the starting weights")
    text = (f"every inner step found ({obs.steps}, in {obs.stepped} meta-updates checked) carries its gradient: the "
            "meta-update differentiates through the adaptation")
    return Finding(ID, TITLE, PASS, measured, "0", text, observed=text)
