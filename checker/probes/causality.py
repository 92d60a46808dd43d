"""causality: a model trained to predict the next token cannot see it: its outputs at a position do not depend
on the tokens after it.

A causal language model is trained on ``(x, y)`` with ``y[t] = x[t + 1]``: its output at
``t`` must be computed from ``x[..t]`` alone. Drop the causal mask (``attn_mask=``, ``is_causal=True``, a
``masked_fill`` with a lower-triangular mask) and attention reads the answer from the next position: the
training loss falls far below what the data allow, yet generation, which has no future to read, is poor.

Rule (the shared observation is :mod:`checker.probes.lm_trace`). Premise: the first training calls of
``cross_entropy`` / ``nll_loss`` on a forward that received token ids have targets equal to the next token
along one dimension (time) for ≥ 98 % of their positions, at 3 calls in a row. Then, on a deep copy in eval
mode (RNG forked, hooks and events muted; the script, its weights, optimizer and random streams untouched),
the tokens from position ``t = T // 2`` on are replaced, and the outputs at positions before ``t`` must not
change: fail when their largest change exceeds 1e-6 of the outputs' largest magnitude. Cannot tell when the
copy fails, no output maps onto the tokens' positions, or nothing at all changed (the outputs ignore the
tokens). Not applicable when no training loss had next-token targets (a classifier, a tagger, a masked or
bidirectional encoder, an autoencoder: their outputs may see the whole sequence).

Measured: 0 exactly (masked scores are exp(-inf) = 0, so later tokens add exact zeros) on the ``lm``
reference (GRU + masked attention), the corpus LSTM language model, the nanoGPT-style corpus script and the
fixtures (``attn_mask``, ``is_causal=True`` in ``scaled_dot_product_attention``, a model shifting inside);
with the mask dropped, 0.24 (the ``lm`` reference without ``attn_mask=``) and 0.08 (the nanoGPT-style
script without its ``masked_fill``). A mask that hides only the next token still lets position ``t - 2``
see ``t``: 0.19, and fails. Why a correct script cannot fail: in a causal model no arithmetic path leads from a later
token to an earlier output, so the outputs before ``t`` are bitwise those of the same copy on the same
inputs (same shapes, same kernels, eval mode, RNG pinned).
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared import lm_trace

ID = "causality"
TITLE = "outputs do not see later tokens"
USES = (lm_trace.OWNER,)  # the shared trace whose errors are this probe's too
SYMPTOM_ID, SYMPTOM = "future-tokens", "how much the outputs before a position change when later tokens change"
THRESHOLD = lm_trace.UNCHANGED


@dataclass
class Observation:
    model: str = ""
    relation: str = ""
    calls: int = 0
    shifted: float = 0.0
    time_dim: int | None = None
    length: int = 0
    cut: int = 0
    before: float | None = None
    after: float | None = None
    problem: str = ""


class Observer:
    def __init__(self, session):
        self.trace = lm_trace.trace(session)

    def summary(self) -> Observation:
        r = self.trace.summary()
        obs = Observation(r.model, r.relation, r.calls, r.shifted, r.time_dim, problem=r.problem)
        if r.relation == "next" and r.tests:
            test = r.tests[0]
            obs.length, obs.cut, obs.before, obs.after = test.length, test.cut, test.before, test.after
        return obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if obs.relation != "next":
        if not obs.model:
            why = "no training loss compared a model's outputs with token ids (not a token model)"
        elif obs.relation == "":
            why = f"{obs.model} takes token ids, but too few training losses were read to tell what it predicts"
        else:
            why = (f"{obs.model} takes token ids, but it is not trained to predict the next token (only "
                   f"{obs.shifted:.0%} of the targets are the next token): its outputs may see the whole sequence")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.problem or obs.before is None:
        why = (f"{obs.model} is trained to predict the next token, but the test on a copy did not run: "
               f"{obs.problem or 'no output has one row per token position'}")
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    where = (f"on an eval copy of {obs.model}, the tokens from position {obs.cut} of {obs.length} on were changed: "
             f"the outputs at the earlier positions changed by {obs.before:.2g}")
    measured, threshold = f"{obs.before:.2g}", f"≤ {THRESHOLD:.0e}"
    if obs.before > THRESHOLD:
        return Finding(ID, TITLE, FAIL, measured, threshold,
                       f"{where} (relative to the outputs' size): a model trained to predict the next token sees it. "
                       "Its attention is not causal (the mask was dropped or does not hide every later position), "
                       "so training copies the answer from the input and the loss falls far below what the data "
                       "allow, while generation, which has no future to read, fails",
                       observed=f"{where} (relative): outputs depend on tokens that come after them")
    if not obs.after:
        why = f"{where}, but the later outputs did not change either: the outputs do not depend on the tokens"
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold, why, observed=why)
    return Finding(ID, TITLE, PASS, measured, threshold,
                   f"{where}, while the later ones changed by {obs.after:.2g}: each output depends only on the tokens "
                   "up to its own position", observed=f"{where}: earlier outputs ignore later tokens")
