"""The parameters the optimizers were given, and the parameter a tensor of an inner loop was made from.

Meta-learning takes gradients with ``torch.autograd.grad`` of trained parameters and of tensors made from them:
fast weights (``p - lr * g``, step after step) and per-task copies (``p.clone()``). A graph node is traced back
to the parameter it stands for through sums, differences and copies only, never through a layer's computation.
"""
from __future__ import annotations

from checker.events import Event

OWNER = "trained-params"  # its subscriptions and errors; the probes that read it name it in USES
STEP_NODES = frozenset({"AddBackward0", "SubBackward0", "RsubBackward0"})  # a step: one operand moved by another
COPY_NODES = frozenset({"CloneBackward0", "AliasBackward0", "ToCopyBackward0", "ViewBackward0"})
DEPTH = 16  # steps and copies followed back from a tensor to its parameter


class TrainedParams:
    """Made once per session (``session.shared(TrainedParams)``): every parameter an optimizer was given, held
    weakly."""

    def __init__(self, session):
        import weakref

        self.ref = weakref.ref
        self.params: dict[int, object] = {}  # id -> weak reference
        session.on(Event.GROUP_ADDED, OWNER, self.on_group)

    def on_group(self, optimizer, group) -> None:
        for p in group["params"]:
            self.params[id(p)] = self.ref(p)

    def __contains__(self, tensor) -> bool:
        ref = self.params.get(id(tensor))
        return ref is not None and ref() is tensor


class Roots:
    """The parameter a graph node stands for: its gradient accumulator's, or the one reached through steps (and,
    with ``copies``, copies); ``wanted`` says which parameters count. Memoised: one per graph walk."""

    def __init__(self, wanted, copies: bool = False):
        self.wanted = wanted
        self.through = STEP_NODES | COPY_NODES if copies else STEP_NODES
        self.memo: dict[int, object] = {}

    def of(self, node, depth: int = 0):
        if node is None or depth > DEPTH:
            return None
        key = id(node)
        if key in self.memo:
            return self.memo[key]
        found = None
        variable = getattr(node, "variable", None)
        if variable is not None:
            found = variable if self.wanted(variable) else None
        elif node.name() in self.through:
            for child, _ in node.next_functions:
                found = self.of(child, depth + 1)
                if found is not None:
                    break
        self.memo[key] = found
        return found


def root_param(tensor, trained: TrainedParams, copies: bool = False):
    """The trained parameter ``tensor`` is, or was made from by steps (and copies); else None."""
    if tensor.grad_fn is None:
        return tensor if tensor in trained else None
    return Roots(trained.__contains__, copies).of(tensor.grad_fn)
