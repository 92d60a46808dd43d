"""graph-span: each backward pass goes back through a bounded part of the run, not through every step before it.

Truncated backpropagation through time carries a recurrent state from one chunk of a stream to the next
and cuts its graph (``hidden = hidden.detach()``). Without the cut, each chunk's graph hangs on the previous
one: the backward pass of chunk k runs through all k chunks (``retain_graph=True`` silences the error a
second backward raises, and a hand-written ``.data`` update the one an optimizer's in-place step raises), so
every step is slower than the last, memory grows, and old gradients computed with stale weights are added.

Rule: the output tensors of every top-level forward run with gradients get a marker in their
``grad_fn.metadata``. At each of the first 12 backward passes, the graph of the tensor handed to
``backward()`` is walked (at most 200 000 nodes) and the distinct forwards whose markers it reaches are
collected; its *span back* is how many of them an earlier backward pass already went through (forwards
backpropagated again). Fail when the span back rises at each of at least 4 consecutive backward passes
(0, 1, 2, 3, 4...). A span back that stays bounded passes: 0 when each loss has its own forwards (however
many: an episode of a policy, a teacher and a student), 1 for a GAN whose generator's output was reached
by the discriminator's backward too, k - 1 for a horizon of k chunks (TBPTT(k1, k2)) that rises and falls.

Measured: span back 0 at every backward on the ``lm`` reference and the corpus LSTM language model (which
cuts with a ``repackage_hidden`` helper), 0 on every reference; with the cut removed, 0, 1, 2, ... 11
(11 rises in a row, over the 12 backward passes walked).
``gc.collect()`` or a ``hidden.detach()`` whose result is not kept change nothing. The existing
``graphs-retained`` probe passes on this bug: each chunk's loss and logits are freed, only the recurrent path
survives, reached from the newest loss. Why a correct script cannot fail: a graph that reaches an earlier,
already backpropagated forward needs retained buffers and weights left unversioned since; a script that
does not carry a graph across steps reaches the same number of forwards at each backward.
Not seen: a chain that starts after the 12th backward pass. Cost: one walk of the loss's graph per backward
pass for the first 12 (0.1 to 0.6 ms each, 2.5 ms in all, on the classifier reference), nothing after.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "graph-span"
TITLE = "each backward covers a bounded history"
SYMPTOM_ID, SYMPTOM = "backward-span", "forwards each backward pass runs through"
WALKED = 12  # backward passes whose graphs are walked
GROWTH = 4  # consecutive rises that fail
MAX_NODES = 200_000
KEY = "kata_forward"


@dataclass
class Observation:
    spans: list[int] = field(default_factory=list)  # per walked backward: forwards reached that an earlier one reached
    reached: list[int] = field(default_factory=list)  # per walked backward: forwards reached
    truncated: int = 0  # walks stopped at MAX_NODES


class Marker:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class Observer:
    def __init__(self, session):
        self.session = session
        self.obs = Observation()
        self.backpropagated: set[int] = set()  # forwards an earlier walked backward pass reached
        session.on(Event.FORWARD_END, ID, self.on_forward_end)
        session.on(Event.BACKWARD, ID, self.on_backward)

    def on_forward_end(self, forward, output) -> None:
        if not forward.grad or len(self.obs.spans) >= WALKED:
            return
        from checker.tensors import tensors_in

        for t in tensors_in(output):
            node = t.grad_fn
            if node is not None:
                node.metadata[KEY] = forward.index

    def on_backward(self, loss) -> None:
        if len(self.obs.spans) >= WALKED or getattr(loss, "grad_fn", None) is None:
            return
        reached, truncated = span(loss.grad_fn)
        self.obs.spans.append(len(reached & self.backpropagated))
        self.obs.reached.append(len(reached))
        self.backpropagated |= reached
        self.obs.truncated += truncated

    def summary(self) -> Observation:
        return self.obs


def span(root) -> tuple[set[int], bool]:
    seen, stack, reached = set(), [root], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if len(seen) >= MAX_NODES:
            return reached, True
        seen.add(id(node))
        try:
            index = node.metadata.get(KEY)
        except Exception:  # a node type without metadata
            index = None
        if index is not None:
            reached.add(index)
        stack.extend(n for n, _ in node.next_functions)
    return reached, False


def rises(spans: list[int]) -> int:
    best = run = 0
    for a, b in zip(spans, spans[1:]):
        run = run + 1 if b > a else 0
        best = max(best, run)
    return best


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if len(obs.spans) < GROWTH + 1:
        why = f"only {len(obs.spans)} backward passes with a graph: too few to see whether they reach further back"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    n = rises(obs.spans)
    series = {"earlier forwards reached again per backward pass": obs.spans}
    if n >= GROWTH:
        return Finding(ID, TITLE, FAIL, f"{n} rises in a row", f"< {GROWTH}",
                       f"the earlier forwards each backward pass ran through again rose at {n} backward passes in a "
                       f"row ({', '.join(map(str, obs.spans))}): every loss backpropagates through all earlier steps. A "
                       "state carried from one step to the next (an RNN's hidden state) keeps its graph: cut it with "
                       "`hidden = hidden.detach()` before each chunk (truncated backpropagation through time)",
                       series, observed=f"each backward pass ran again through more earlier steps than the last "
                                        f"({', '.join(map(str, obs.spans))}): steps get slower and memory grows")
    return Finding(ID, TITLE, PASS, f"{n} rises in a row", f"< {GROWTH}",
                   f"each backward pass ran through at most {max(obs.reached)} forwards, at most {max(obs.spans)} of "
                   f"them already backpropagated ({len(obs.spans)} backward passes walked)", series,
                   observed=f"each backward pass went back over at most {max(obs.spans)} earlier forwards")
