"""next-token: a language model is trained to predict the token after its input, not the token it is given.

``x = data[i:i + T]`` with ``y = data[i:i + T]`` (instead of ``data[i + 1:i + 1 + T]``) asks a causal model to
output the token it has just read: copying is enough, the training loss falls to almost 0 within a few steps,
and the model learns nothing about what comes next.

Rule (the shared observation is :mod:`checker.probes.lm_trace`). The first training calls of
``cross_entropy`` / ``nll_loss`` on a forward that received token ids are read: their targets are laid on the
tokens' grid and compared with the token at the same position and with the next one.

* pass: ≥ 98 % of the targets equal the next token along one dimension, at 3 calls in a row (the data are
  shifted in the script, or the model shifts inside: ``labels[:, 1:]`` against ``logits[:, :-1]``); or the
  targets equal the tokens the model is given, but on the copy the output at position ``t`` does not change
  when only the token at ``t`` does (a decoder fed its targets for teacher forcing shifts them inside: SOS,
  then the token before);
* fail: ≥ 98 % equal the token at their own position (and fewer the next one), at 3 calls in a row, the
  output at ``t`` changes with the token at ``t`` alone, and the model is causal along some dimension that
  carries information: on an eval copy (RNG forked, hooks muted),
  changing the tokens from ``t = T // 2`` on leaves the outputs before ``t`` unchanged (≤ 1e-6 relative) while
  changing the tokens before ``t`` changes the outputs from ``t`` on (> 1e-6). A model that reads a sequence
  left to right and is taught to output what it was just given;
* not applicable: no training loss compared outputs with token ids, the targets are neither (a classifier, a
  tagger, a masked model), or the targets equal the tokens but the model sees the whole sequence (an
  autoencoder reconstructing its input is correct);
* cannot tell: the copy's forward failed or no output maps onto the tokens' positions.

Measured: 100 % of the targets equal the next token on the ``lm`` reference and the corpus language models
(0 to 2 % equal their own token); with the shift dropped, 100 % equal their own token and 1 % (nanoGPT-style
corpus script), 8 % (``lm``) or 21 % (a fixture) the next. A bidirectional autoencoder (100 % its own token)
is not causal along time (its earlier outputs change by about 1 when later tokens change): not applicable.
The batch dimension never passes for time: outputs of later samples do not depend on earlier samples
(mixing 0). Why a correct script cannot fail: a next-token objective makes at most as many targets equal to
their own position's token as the data repeat a token (a text with a character repeated 98 % of the time has
nothing to learn), and a correct autoencoder is not causal.
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared import lm_trace

ID = "next-token"
TITLE = "targets are the next token"
USES = (lm_trace.OWNER,)  # the shared trace whose errors are this probe's too
SYMPTOM_ID, SYMPTOM = "target-offset", "where the training targets sit relative to the input tokens"
UNCHANGED = lm_trace.UNCHANGED


@dataclass
class Observation:
    model: str = ""
    relation: str = ""
    calls: int = 0
    shifted: float = 0.0
    same: float = 0.0
    causal_dims: list[int] | None = None  # dimensions along which the copy is causal and mixing
    sees_own: bool | None = None  # along those, an output changes with the token at its own position alone
    problem: str = ""


class Observer:
    def __init__(self, session):
        self.trace = lm_trace.trace(session)

    def summary(self) -> Observation:
        r = self.trace.summary()
        obs = Observation(r.model, r.relation, r.calls, r.shifted, r.same, problem=r.problem)
        if r.relation == "same" and r.tests:
            causal = [t for t in r.tests if t.before is not None and t.before <= UNCHANGED
                      and t.mixing is not None and t.mixing > UNCHANGED]
            obs.causal_dims = [t.dim for t in causal]
            owns = [t.own for t in causal if t.own is not None]
            obs.sees_own = any(own > UNCHANGED for own in owns) if owns else None
        return obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    figures = f"{obs.shifted:.0%} of the targets are the next token, {obs.same:.0%} the token at their own position"
    if obs.relation == "next":
        return Finding(ID, TITLE, PASS, f"{obs.shifted:.0%} next", f"≥ {lm_trace.AGREE:.0%}",
                       f"{obs.model} is trained to predict the token after its input: {figures} "
                       f"({obs.calls} training losses read)", observed=f"{figures}")
    if obs.relation != "same":
        if not obs.model:
            why = "no training loss compared a model's outputs with token ids (not a token model)"
        elif obs.relation == "":
            why = f"{obs.model} takes token ids, but too few training losses were read to tell what it predicts"
        else:
            why = f"{obs.model} takes token ids, but its targets are not the tokens ({figures})"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.problem or obs.causal_dims is None:
        why = (f"{obs.model}'s targets are the tokens it is given ({figures}), but the test on a copy did not run: "
               f"{obs.problem or 'no output has one row per token position'}")
        return Finding(ID, TITLE, CANNOT_TELL, f"{obs.same:.0%} same", f"< {lm_trace.AGREE:.0%}", why, observed=why)
    if not obs.causal_dims:
        why = (f"{obs.model}'s targets are the tokens it is given ({figures}), but its outputs see the whole sequence "
               "(an autoencoder reconstructing its input): not a next-token model")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.sees_own is False:
        text = (f"{obs.model} is given its targets ({figures}) but shifts them inside: the output at each position "
                "depends only on the tokens before it, never on the token at its own position (a decoder fed its "
                "targets for teacher forcing), so it is trained to predict the next token")
        return Finding(ID, TITLE, PASS, f"{obs.same:.0%} same, shifted inside", "", text, observed=text)
    return Finding(ID, TITLE, FAIL, f"{obs.same:.0%} same", f"< {lm_trace.AGREE:.0%}",
                   f"{obs.model} reads its tokens in order (its outputs never depend on later tokens) and is trained "
                   f"to output the token it was just given: {figures}. The targets are not shifted by one "
                   "(y = data[i:i + T] instead of data[i + 1:i + 1 + T]), so copying the input is enough: the loss "
                   "drops to almost 0 and the model learns nothing about what comes next",
                   observed="at every position, what the model is trained to output is already in what it was given "
                            "there; the training loss falls to almost nothing within a few steps")
