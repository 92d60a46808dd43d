"""What the ``causality`` and ``next-token`` probes share: a token model's training loss, and one perturbation test.

Not a probe. One :class:`Trace` per session (``trace(session)``) keeps the arguments of
the latest training forwards of a top-level module that received a 2-D integer tensor
(token ids, ``(batch, time)`` or ``(time, batch)``), and reads the first training calls of
``cross_entropy`` / ``nll_loss`` that followed: their integer targets laid out on the
tokens' grid (``(d0, d1)``, ``(d0, d1 - 1)`` or ``(d0 - 1, d1)``, whichever the target's
size allows) are compared with the tokens at the same position and at the next one, along
either dimension. Targets below 0 (``ignore_index=-1``/``-100``) are left out.

* ``next``: ≥ 98 % of the targets equal the token one position later along a dimension
  (that dimension is time) — a next-token objective, whether the script shifts the data
  (``y = data[i + 1:i + 1 + T]``) or the model shifts inside (``labels[:, 1:]``);
* ``same``: ≥ 98 % equal the token at their own position, and fewer than 98 % the next one;
* ``other``: neither (a classifier, a tagger, a masked model's corrupted positions).

Three checked calls that agree settle it. Then, once and outside any forward, a deep copy
of the model in eval mode (dropout off) runs with the RNG forked and every hook and event
muted, on the same arguments and on the same arguments with the tokens from position
``t = T // 2`` on replaced (each by the next distinct token id of the batch, so ids stay in
the vocabulary): the largest change of the outputs at positions before ``t`` (``before``)
and at ``t`` and after (``after``), with the tokens before ``t`` replaced, the change
at ``t`` and after (``mixing``), and with only the token at ``t`` replaced, the change
of the output at ``t`` (``own``: 0 when the model shifts inside, as a decoder given
its targets for teacher forcing does), each relative to the outputs' largest magnitude. Outputs
are mapped to positions when their leading dimensions are the tokens' grid, or their
first is its size (``logits.view(-1, V)``). For ``same``, both dimensions are measured
(time is the one whose later outputs depend on earlier tokens).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from checker.events import Event

KINDS = ("cross_entropy", "nll_loss")
AGREE = 0.98  # fraction of targets that must match
CALLS = 3  # checked calls that must agree
MAX_CALLS = 8  # training loss calls read at most
GIVE_UP = 16  # training forwards without token ids before the trace stops looking
MIN_POSITIONS = 8  # targets compared per call, at least
UNCHANGED = 1e-6  # relative change under which outputs before t count as unchanged


@dataclass
class Causal:
    """The perturbation test along one dimension of the tokens."""

    dim: int = 0
    length: int = 0  # positions along it
    cut: int = 0  # t
    before: float | None = None  # relative change of outputs before t when tokens from t on change
    after: float | None = None  # ... of outputs from t on
    mixing: float | None = None  # ... of outputs from t on when tokens before t change
    own: float | None = None  # ... of the output at t when only the token at t changes (0: the model shifts inside)


@dataclass
class TraceResult:
    model: str = ""  # class of the module that received token ids in training ("" none)
    calls: int = 0  # loss calls compared
    relation: str = ""  # "next", "same", "other", "" (undecided)
    time_dim: int | None = None
    shifted: float = 0.0  # fraction of targets equal to the next token (best dimension)
    same: float = 0.0  # fraction equal to the token at their own position
    problem: str = ""  # why the perturbation test could not run
    tests: list[Causal] = field(default_factory=list)


OWNER = "lm-trace"  # the trace's own name for its subscriptions and errors; the probes that use it name it in USES


def trace(session) -> "Trace":
    """The session's trace, shared by the probes that read it."""
    return session.shared(Trace)


class Trace:
    def __init__(self, session):
        self.session = session
        self.result = TraceResult()
        self.done = False
        self._forwards = 0  # training forwards without token ids
        self._seen = 0  # training forwards
        self._pending = None
        self._kept: tuple[Any, tuple, dict, Any] | None = None  # (forward, args, kwargs, tokens)
        self._votes: list[tuple[str, int | None, float, float]] = []
        self._due: tuple | None = None  # (module, args, kwargs, tokens) waiting for the perturbation test
        self._current: tuple | None = None  # (forward, args, kwargs, tokens) of the forward running now
        self._args: tuple | None = None  # (module, args, kwargs) of a top-level call about to start
        self._due_forward = None  # a forward whose full arguments the perturbation test waits for
        self._pre = session.patches.forward_pre_hook(OWNER, self._before)
        self._handles = [self._pre, session.patches.forward_hook(OWNER, self._after, with_kwargs=True)]
        session.on(Event.FORWARD, OWNER, self.on_forward)
        session.on(Event.LOSS, OWNER, self.on_loss)
        session.on(Event.BACKWARD, OWNER, self.on_quiet)
        session.on(Event.UPDATE_PRE, OWNER, self.on_quiet)

    # -- keeping the token forwards' arguments ----------------------------------
    def on_forward(self, forward) -> None:
        if self._due_forward is None:
            self._pending = forward if forward.grad and not self.done else None
        seen, self._args = self._args, None
        if self._pending is not None and seen is not None and seen[0] is forward.ref():
            self._begin(forward, seen[1], seen[2])

    def _before(self, module, args, kwargs=None) -> None:
        """The arguments of a top-level call (this hook may run before or after the session's).

        A global pre-hook gets no keyword arguments. Where a top-level call passes no token ids positionally
        (``model(input_ids=ids, labels=ids)``), the module is asked to hand this hook its keywords from its next
        call on: torch decides that per module, by the hook's id in ``_forward_pre_hooks_with_kwargs`` (a dict
        of ids, so the model still copies and pickles as before)."""
        if _compiling():  # inside code torch.compile traces: call through, adding no guards or side effects
            return
        if kwargs is None:
            kwargs = {}
            wants = getattr(module, "_forward_pre_hooks_with_kwargs", None)
            top = self.session.depth == 0 or self._pending is not None and self._pending.ref() is module
            if top and isinstance(wants, dict) and token_ids(args) is None:
                wants[self._pre.id] = True
        pending = self._pending
        if pending is not None and pending.ref() is module:
            self._begin(pending, args, kwargs)
        elif self.session.depth == 0:
            self._args = (module, args, kwargs)

    def _begin(self, forward, args, kwargs) -> None:
        tokens = token_ids((args, kwargs))
        self._current = (forward, args, kwargs, tokens) if tokens is not None else None

    def _after(self, module, args, kwargs, output) -> None:
        if _compiling():
            return
        pending = self._pending
        if pending is None or pending.ref() is not module:
            return
        self._pending = None
        self._current = None
        tokens = token_ids((args, kwargs))
        if self._due_forward is pending:
            self._due_forward = None
            if tokens is not None:
                self._due = (module, args, kwargs, tokens)
            self._stop()
            return
        if self.done:
            return
        self._seen += 1
        if self._seen >= 2 * GIVE_UP and not self._votes:  # token ids, perhaps, but no loss on them to read
            self._stop()
            return
        if tokens is None:
            self._forwards += 1
            if self._forwards >= GIVE_UP and self._kept is None:
                self._stop()
            return
        self._kept = (pending, args, kwargs, tokens)

    def _stop(self) -> None:
        self.done = True
        self._kept = self._current = None
        if self._due_forward is None:
            self._pending = None
            for handle in self._handles:
                self.session.patches.remove(handle)
            self._handles = []

    # -- reading the loss ------------------------------------------------------------
    def on_loss(self, call) -> None:
        import torch

        if self.done or self._kept is None or call.kind not in KINDS:
            return
        if not getattr(call.input, "requires_grad", False):
            return
        target = call.target
        if not isinstance(target, torch.Tensor) or target.dtype.is_floating_point:
            return
        inside = self._current if self._current is not None and self._current[0] is self.session.forward else None
        if inside is None and self.session.forward is not None:
            return  # a loss inside a forward that received no token ids
        forward, args, kwargs, tokens = inside or self._kept
        vote = compare(tokens, target.detach())
        if vote is None:
            return
        self._votes.append(vote)
        self.result.model = forward.name
        self.result.calls = len(self._votes)
        relations = [v[0] for v in self._votes]
        if len(relations) >= CALLS and len(set(relations[-CALLS:])) == 1:
            self._settle(*vote)
            module = forward.ref()
            if self.result.relation in ("next", "same") and module is not None:
                if inside is not None:
                    self._due_forward = forward  # its full arguments come when it returns
                else:
                    self._due = (module, args, kwargs, tokens)
            self._stop()
        elif len(relations) >= MAX_CALLS:
            self._settle("other", None, *self._votes[-1][2:])
            self._stop()

    def _settle(self, relation: str, dim: int | None, shifted: float, same: float) -> None:
        self.result.relation, self.result.time_dim = relation, dim
        self.result.shifted, self.result.same = shifted, same

    def on_quiet(self, *_) -> None:
        """Outside any forward: run the perturbation test, once, when it is due."""
        if self._due is None or self.session.forward is not None:
            return
        module, args, kwargs, tokens = self._due
        self._due = None
        dims = [self.result.time_dim] if self.result.relation == "next" else [0, 1]
        try:
            self.result.tests = perturb(self.session, module, args, kwargs, tokens, dims)
        except Exception as exc:  # said in the verdict, never a probe error
            self.result.problem = f"the model's forward failed on a copy ({type(exc).__name__}: {exc})"

    def summary(self) -> TraceResult:
        if self._due is not None:
            self.on_quiet()
        if not self.done:
            if self._votes:
                self._settle("", None, *self._votes[-1][2:])
            self._stop()
        self._due_forward = None
        self._stop()
        return self.result


def _compiling() -> bool:
    import torch

    return torch.compiler.is_compiling()


def token_ids(value) -> Any:
    """The first 2-D integer tensor among a forward's arguments, both dimensions at least 2."""
    from checker.tensors import tensors_in

    for t in tensors_in(value):
        if t.dim() == 2 and not t.dtype.is_floating_point and not t.dtype.is_complex and t.dtype != _bool() \
                and min(t.shape) >= 2:
            return t
    return None


def _bool():
    import torch

    return torch.bool


def compare(tokens, target) -> tuple[str, int | None, float, float] | None:
    """(relation, time dimension, fraction next, fraction same) of one call, or None when the shapes do not fit."""
    d0, d1 = tokens.shape
    n = target.numel()
    x = tokens.detach().to(target.device)
    layouts = []
    if n == d0 * d1:
        layouts.append(target.reshape(d0, d1))
    if n == d0 * (d1 - 1):
        layouts.append(target.reshape(d0, d1 - 1))
    if n == (d0 - 1) * d1 and d0 != d1:
        layouts.append(target.reshape(d0 - 1, d1))
    best = None
    for grid in layouts:
        for dim in (0, 1):
            if grid.shape[1 - dim] != x.shape[1 - dim]:
                continue
            length = min(grid.shape[dim], x.shape[dim] - 1)
            g_next = grid.narrow(dim, 0, length)
            nxt = fraction(g_next, x.narrow(dim, 1, length))
            length = min(grid.shape[dim], x.shape[dim])
            same = fraction(grid.narrow(dim, 0, length), x.narrow(dim, 0, length))
            if nxt is None or same is None:
                continue
            if best is None or nxt > best[2]:
                best = ("next" if nxt >= AGREE else "same" if same >= AGREE else "other", dim, nxt, same)
    if best is not None and best[0] != "next":
        best = ("same" if best[3] >= AGREE else "other", None, best[2], best[3])
    return best


def fraction(targets, tokens) -> float | None:
    keep = targets >= 0
    count = int(keep.sum())
    if count < MIN_POSITIONS:
        return None
    return float(((targets == tokens) & keep).sum()) / count


# -- the perturbation test ---------------------------------------------------------


def perturb(session, module, args: tuple, kwargs: dict, tokens, dims: list[int]) -> list[Causal]:
    import torch

    from checker.probes._shared.replay import copy_of, forked_rng, quiet

    if type(module).__name__ in ("DataParallel", "DistributedDataParallel"):
        module = module.module
    device = next((p.device for p in module.parameters()), torch.device("cpu"))
    results = []
    with quiet(session), forked_rng(device), torch.inference_mode(False), torch.no_grad(), \
            torch.autocast("cpu", enabled=False), \
            (torch.autocast("cuda", enabled=False) if device.type == "cuda" else contextlib.nullcontext()):
        twin = copy_of(module)
        base = outputs(twin, args, kwargs, tokens, tokens)
        for dim in dims:
            length = tokens.shape[dim]
            cut = length // 2
            test = Causal(dim, length, cut)
            late = replaced(tokens, dim, cut, length)
            early = replaced(tokens, dim, 0, cut)
            changed = outputs(twin, args, kwargs, tokens, late)
            mixed = outputs(twin, args, kwargs, tokens, early)
            test.before, test.after = change(base, changed, tokens.shape, dim, cut)
            _, test.mixing = change(base, mixed, tokens.shape, dim, cut)
            alone = outputs(twin, args, kwargs, tokens, replaced(tokens, dim, cut, cut + 1))
            _, test.own = change(base, alone, tokens.shape, dim, cut, stop=cut + 1)
            results.append(test)
    return results


def replaced(tokens, dim: int, start: int, stop: int):
    """The tokens with positions [start, stop) along ``dim`` each replaced by the next distinct id of the batch."""
    import torch

    ids = torch.unique(tokens)
    moved = ids[(torch.searchsorted(ids, tokens.contiguous()) + 1) % len(ids)]  # no warning in the script's output
    out = tokens.clone()
    index = [slice(None), slice(None)]
    index[dim] = slice(start, stop)
    out[tuple(index)] = moved[tuple(index)]
    return out


def outputs(twin, args: tuple, kwargs: dict, tokens, new) -> list:
    """The copy's floating outputs for the arguments with ``tokens`` swapped for ``new`` (detached copies)."""
    import torch

    from checker.probes._shared.replay import seed_all
    from checker.tensors import tensors_in

    def swap(value):
        if value is tokens:
            return new
        if isinstance(value, torch.Tensor):
            return value.detach()
        if type(value) in (tuple, list):
            return type(value)(swap(v) for v in value)
        if type(value) is dict:
            return {k: swap(v) for k, v in value.items()}
        return value

    seed_all(0)  # every forward draws alike: randomness left on in eval mode cannot pass for a change
    out = twin(*swap(tuple(args)), **swap(dict(kwargs)))
    return [t.detach() for t in tensors_in(out) if t.is_floating_point()]


def change(base: list, other: list, grid: tuple, dim: int, cut: int,
           stop: int | None = None) -> tuple[float | None, float | None]:
    """Largest change of the outputs mapped onto the tokens' grid, before ``cut`` and from it on (to ``stop``),
    relative to the outputs' largest magnitude; (None, None) when no output maps onto the grid."""
    stop = grid[dim] if stop is None else stop
    before = after = None
    scale = 0.0
    for a, b in zip(base, other):
        a, b = on_grid(a, grid), on_grid(b, grid)
        if a is None or b is None or a.shape != b.shape:
            continue
        diff = (a.double() - b.double()).abs().nan_to_num(0.0)
        scale = max(scale, float(a.double().abs().nan_to_num(0.0).max()))
        first = float(diff.narrow(dim, 0, cut).max()) if cut > 0 else 0.0
        rest = float(diff.narrow(dim, cut, stop - cut).max())
        before = first if before is None else max(before, first)
        after = rest if after is None else max(after, rest)
    if before is None or scale == 0:
        return None, None
    return before / scale, after / scale


def on_grid(t, grid: tuple):
    if t.dim() >= 2 and tuple(t.shape[:2]) == tuple(grid):
        return t
    if t.dim() >= 1 and t.shape[0] == grid[0] * grid[1]:
        return t.reshape(grid[0], grid[1], *t.shape[1:])
    return None
