"""logit-input: a loss that applies its own softmax (or sigmoid) gets raw scores, not probabilities.

``F.cross_entropy`` (and ``nn.CrossEntropyLoss``) applies ``log_softmax`` to its
input, and ``binary_cross_entropy_with_logits`` (``nn.BCEWithLogitsLoss``) applies
``logsigmoid``: both expect raw scores (logits). Fed probabilities, they still run,
but the scores they see are squeezed into [0, 1], so the loss cannot approach 0 and
its gradients shrink: the model learns slowly and plateaus with low confidence.

Rule. Training calls of these losses (their input requires grad), of ``nll_loss``
and of ``log_softmax`` (``F.log_softmax``, ``torch.log_softmax`` and the tensor
method, seen by the instrumentation) are grouped by call site: the script's line that
called it and the line that called that one (torch's and the checker's frames left
out), so a teacher's and a student's loss, or a loss helper called from two places,
are judged apart. A call's input is *already normalised* (probabilities) when:

* ``cross_entropy`` (class dimension 1, or 0 for an unbatched input; at least two
  classes), ``log_softmax`` (along its own dimension) and ``nll_loss``: every
  element is >= 0 and every row along the class dimension sums to the same positive
  constant c, and c is the same at every call of the site (a spread of the row
  sums, and of c, of at most 1e-4 of c in float32 and float64, or 4 machine
  epsilons of the input's dtype in half precision, where a softmax rounds more
  coarsely). The same c across calls matters for a batch of one row;
* ``binary_cross_entropy_with_logits``: every element lies in [0, 1].

A call gets what it expects when it is not normalised, except ``nll_loss``, which
expects log-probabilities: every element <= 0 and each row's logsumexp 0 (within
1e-3); raw scores into ``nll_loss`` are not read. A site *fails* when at least 3 of
its training calls were checked and every checked call had probabilities; for the
binary loss, also some targets of those calls were below 1/2. The first 16 calls of
a site are checked, then every 8th (one reduction and one host sync each); a site is
no longer checked after its first call with what it expects, so a correct script
pays for one check per site. The probe fails when a site fails; it cannot tell when a
site had probabilities at every checked call but at fewer than 3, or (binary) never
with a target below 1/2; it passes when every site had a call with what it expects:
``cross_entropy`` on raw scores (label smoothing, class weights, soft targets),
``nll_loss`` on ``log_softmax``, a ``log_softmax`` of raw scores gathered by hand.
Not applicable when none of them was called in training.

Why a correct script does not fail. Raw scores are free real numbers: a fresh
model's scores spread around 0 with both signs, and since adding a constant to a
row does not change the loss, nothing in training holds a row's sum fixed, let
alone equal across rows, batches and updates. ``log_softmax(z)`` is <= 0 (its
rows' sums vary), temperature ``z / T`` and centred logits (rows summing to 0)
keep raw scores raw, and label smoothing, class weights, ``ignore_index`` and soft
(distillation) targets act on the target, not the input; a (B, C, H, W) input is
read along its class dimension. Equal positive row sums at every checked call of a
site are what a softmax produces, or a multiple of one (``10 * softmax``: rows sum
to 10, and fail too). For the binary loss, a classifier whose training targets
include 0 gives those samples negative scores as soon as it predicts any of them
as 0; scores confined to [0, 1] at every checked call are what a sigmoid produces
(or a model that never predicts class 0 on a training batch, which the health
gate's accuracy criterion sees as well). Not caught: probabilities shifted below
0 (``softmax(z) - 0.5``), which no plausible fix writes.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "logit-input"
TITLE = "the loss gets raw scores"
SYMPTOM_ID, SYMPTOM = "loss-input-range", "values the loss receives"

KINDS = ("cross_entropy", "binary_cross_entropy_with_logits", "nll_loss")  # losses judged; log_softmax calls too
RAW = ("cross_entropy", "binary_cross_entropy_with_logits", "log_softmax")  # what expects raw scores
MIN_CALLS = 3  # checked training calls of a site, every one normalised, to fail
FIRST_CHECKED = 16  # calls of a site checked one by one ...
EVERY = 8  # ... then every EVERY-th
TOLERANCE = 1e-4  # relative spread of the row sums in float32 / float64
HALF_EPSILONS = 4  # ... and in machine epsilons of a half-precision input
FRAMES = 2  # the script's frames that name a call site


@dataclass
class Observation:
    # per call site: {"kind", "where" (the script's line, then its caller's), "calls", "checked", "normalised",
    # "total" (the row sum of its first normalised call), "low_targets" (targets below 1/2 at normalised calls)}
    sites: list[dict] = field(default_factory=list)
    evaluation_calls: int = 0  # calls of these losses without gradients
    other_losses: list[str] = field(default_factory=list)  # other loss functions called in training


class Observer:
    def __init__(self, session):
        self.session = session
        self.sites: dict[tuple, dict] = {}
        self.evaluation_calls = 0
        self.other: dict[str, None] = {}
        self._skip: tuple[str, ...] | None = None
        session.on(Event.LOSS, ID, self.on_loss)
        session.on(Event.LOG_SOFTMAX, ID, self.on_log_softmax)

    def on_log_softmax(self, x, dim) -> None:
        import torch

        if isinstance(x, torch.Tensor) and x.requires_grad and torch.is_grad_enabled():
            self.judge_call("log_softmax", LogSoftmaxCall(x, dim))

    def on_loss(self, call) -> None:
        if not getattr(call.input, "requires_grad", False):
            self.evaluation_calls += call.kind in KINDS
            return
        if call.kind not in KINDS:
            self.other.setdefault(call.kind, None)
            return
        self.judge_call(call.kind, call)

    def judge_call(self, kind: str, call) -> None:
        where = self._where()
        site = self.sites.get((kind, where))
        if site is None:
            site = self.sites[kind, where] = {"kind": kind, "where": list(where), "calls": 0,
                                              "checked": 0, "normalised": 0, "total": None, "low_targets": False,
                                              "raw": False}
        site["calls"] += 1
        n = site["calls"] - 1
        if site["raw"] or (n >= FIRST_CHECKED and n % EVERY):
            return
        read = {"cross_entropy": self._softmaxed, "log_softmax": self._softmaxed, "nll_loss": self._exponentiated,
                "binary_cross_entropy_with_logits": self._sigmoided}[kind]
        verdict = read(call, site)
        if verdict is None:  # not a shape (or, for nll_loss, not a kind of values) this rule reads
            return
        site["checked"] += 1
        site["normalised"] += verdict
        site["raw"] = not verdict

    def _where(self) -> tuple[str, ...]:
        """The script's lines that led to this loss call: the caller, then its caller (torch and the checker left out)."""
        if self._skip is None:
            import torch

            checker = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            self._skip = (os.path.dirname(torch.__file__) + os.sep, checker + os.sep)
        frame, found = sys._getframe(1), []
        while frame is not None and len(found) < FRAMES:
            filename = frame.f_code.co_filename
            if not filename.startswith(self._skip) and not filename.startswith("<frozen"):
                found.append(f"{os.path.basename(filename)}:{frame.f_lineno}")
                if frame.f_code.co_name == "<module>":  # a script's top level: what ran it is not the script
                    break
            frame = frame.f_back
        return tuple(found)

    @staticmethod
    def _exponentiated(call, site: dict) -> bool | None:
        """For ``nll_loss``, which expects log-probabilities: True when it got probabilities (a softmax without its
        log), False when it got log-probabilities (every value <= 0, each row's logsumexp 0), None otherwise."""
        import torch

        x = call.input
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0 or x.numel() == 0:
            return None
        dim = 0 if x.dim() == 1 else 1
        if x.shape[dim] < 2:
            return None
        x = x.detach().float()
        top, spread = torch.stack([x.max(), torch.logsumexp(x, dim).abs().max()]).tolist()  # one sync
        if top <= 1e-6 and spread <= 1e-3:
            return False  # log-probabilities: what nll_loss expects
        probabilities = Observer._softmaxed(call, site)
        return True if probabilities else None

    @staticmethod
    def _softmaxed(call, site: dict) -> bool | None:
        import torch

        x = call.input
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0 or x.numel() == 0:
            return None
        dim = getattr(call, "dim", None)
        dim = (0 if x.dim() == 1 else 1) if dim is None else dim
        if x.shape[dim] < 2:
            return None
        x = x.detach()
        sums = x.sum(dim, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
        low, s_min, s_max = torch.stack([x.min().to(sums.dtype), sums.min(), sums.max()]).tolist()  # one sync
        eps = torch.finfo(x.dtype).eps
        tolerance = HALF_EPSILONS * eps if eps > 1e-3 else TOLERANCE
        if not (low >= 0 and s_min > 0 and s_max - s_min <= tolerance * s_max):
            return False
        c = (s_min + s_max) / 2
        if site["total"] is None:
            site["total"] = c
        return abs(c - site["total"]) <= tolerance * site["total"]

    @staticmethod
    def _sigmoided(call, site: dict) -> bool | None:
        import torch

        x, target = call.input, call.target
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            return None
        x = x.detach()
        values = [x.min().float(), x.max().float()]
        if isinstance(target, torch.Tensor) and target.numel():
            values.append((target.detach() < 0.5).any().float())
        found = torch.stack(values).tolist()  # one sync
        inside = found[0] >= 0 and found[1] <= 1
        if inside and len(found) > 2 and found[2]:
            site["low_targets"] = True
        return inside

    def summary(self) -> Observation:
        sites = [{k: v for k, v in s.items() if k != "raw"} for s in self.sites.values()]
        return Observation(sites, self.evaluation_calls, list(self.other))


@dataclass
class LogSoftmaxCall:
    """A ``log_softmax`` in training, read like a loss on raw scores along its own dimension."""

    input: Any
    dim: int | None


def normalised(site: dict) -> bool:
    """Every checked call of the site was already normalised (it may still be too few to judge)."""
    return site["checked"] > 0 and site["normalised"] == site["checked"]


def fails(site: dict) -> bool:
    return normalised(site) and site["checked"] >= MIN_CALLS and (
        site["kind"] != "binary_cross_entropy_with_logits" or site["low_targets"])


def _seen(site: dict) -> str:
    """What the loss received at a site, in the symptom's words."""
    counted = f"at {site['normalised']} of {site['checked']} training calls checked"
    if site["calls"] > site["checked"]:
        counted += f" (of {site['calls']})"
    if site["kind"] != "binary_cross_entropy_with_logits":
        what = "log_softmax's inputs" if site["kind"] == "log_softmax" else "the loss's inputs"
        return f"{what} were non-negative and every row summed to {site['total']:.4g} {counted}"
    return f"the loss's inputs all lay between 0 and 1 {counted}" + (
        ", though some targets were 0" if site["low_targets"] else "")


def _place(site: dict) -> str:
    where = site["where"]
    if not where:
        return "(called from outside the script)"
    return f"at {where[0]}" + (f" (called from {where[1]})" if len(where) > 1 else "")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    called = [s for s in obs.sites if s["calls"]]
    sites = [s for s in called if s["checked"]]
    if not sites:
        if called:
            why = ("the inputs had a shape or values this rule does not read (a single class; raw scores into "
                   "nll_loss)")
        elif obs.evaluation_calls:
            why = "cross_entropy, nll_loss or binary_cross_entropy_with_logits was called only without gradients"
        else:
            why = ("no loss on class scores (cross_entropy, nll_loss, binary_cross_entropy_with_logits) and no "
                   "log_softmax was called in training")
        if obs.other_losses:
            why += f"; training used {', '.join(obs.other_losses)}"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why,
                       observed=("no loss on class scores and no log_softmax was called in training" if not called
                                 else why))
    failing = [s for s in sites if fails(s)]
    if failing:
        worst = failing[0]
        if worst["kind"] == "nll_loss":
            message = (f"nll_loss {_place(worst)} received probabilities (a softmax without its log): {_seen(worst)}. "
                       "nll_loss expects log-probabilities, so it minimises -p instead of -log p: a loss that cannot "
                       "approach 0 and gradients that vanish as p grows. Use log_softmax (or cross_entropy on the "
                       "raw scores)")
        else:
            softmax = worst["kind"] != "binary_cross_entropy_with_logits"
            message = (f"{worst['kind']} {_place(worst)} received probabilities (a "
                       f"{'softmax' if softmax else 'sigmoid'} already applied): {_seen(worst)}. It applies its own "
                       f"{'log_softmax' if softmax else 'logsigmoid'}, so the scores it sees are squeezed into [0, 1]: "
                       "the loss cannot approach 0, its gradients shrink, and the model learns slowly and stays "
                       "unconfident")
        if len(failing) > 1:
            message += f" ({len(failing)} call sites like this)"
        return Finding(ID, TITLE, FAIL, f"{worst['normalised']} of {worst['checked']} calls", "not all", message,
                       observed=_seen(worst))
    undecided = [s for s in sites if normalised(s)]
    if undecided:
        site = undecided[0]
        why = (f"only {site['checked']} training calls were checked (at least {MIN_CALLS} needed)"
               if site["checked"] < MIN_CALLS else "no target below 1/2 was seen at those calls")
        return Finding(ID, TITLE, CANNOT_TELL, f"{site['normalised']} of {site['checked']} calls", "not all",
                       f"{site['kind']} {_place(site)} may have received probabilities: {_seen(site)}, but {why}",
                       observed=f"{_seen(site)}, but {why}")
    checked = sum(s["checked"] for s in sites)
    calls = sum(s["calls"] for s in sites)
    kinds = ", ".join(dict.fromkeys(s["kind"] for s in sites))
    return Finding(ID, TITLE, PASS, f"0 of {len(sites)} call sites", "0",
                   f"{kinds} received what they expect (raw scores; log-probabilities for nll_loss): at each of its "
                   f"{len(sites)} training call site(s) a checked call had negative values, rows of different sums or "
                   f"(binary) values above 1, or (nll_loss) rows of log-probabilities ({checked} checked of {calls} "
                   "calls)",
                   observed="what the loss received took negative values or rows of different sums, as raw scores "
                            "and log-probabilities do")
