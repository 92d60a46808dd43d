"""causality, next-token, tied-weights, graph-span: the shared target alignment on hand-made tensors, and the
judges on hand-made observations (no training)."""
from __future__ import annotations

import pytest
import torch

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import causality, graph_span, next_token, tied_weights
from checker.probes._shared import lm_trace

STREAM = torch.arange(200) * 7 % 23  # no token repeats its predecessor


def windows(shift: int, b: int = 4, t: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([STREAM[i:i + t] for i in range(0, 10 * b, 10)])
    y = torch.stack([STREAM[i + shift:i + shift + t] for i in range(0, 10 * b, 10)])
    return x, y


def test_targets_one_token_on_are_next_along_time_whatever_their_layout():
    x, y = windows(1)
    assert lm_trace.compare(x, y.reshape(-1))[:2] == ("next", 1)
    assert lm_trace.compare(x.t().contiguous(), y.t().reshape(-1))[:2] == ("next", 0)  # (time, batch) streams
    assert lm_trace.compare(x, x[:, 1:].reshape(-1))[:2] == ("next", 1)  # shifted inside: labels[:, 1:]


def test_targets_equal_to_the_inputs_are_same_and_ignored_positions_do_not_count():
    x, _ = windows(1)
    assert lm_trace.compare(x, x.reshape(-1))[0] == "same"
    ignored = x.clone()
    ignored[:, ::2] = -100
    assert lm_trace.compare(x, ignored.reshape(-1))[0] == "same"


def test_class_labels_and_unrelated_tags_are_not_read_as_a_language_model():
    x, y = windows(1)
    assert lm_trace.compare(x, torch.tensor([0, 1, 2, 3])) is None
    assert lm_trace.compare(x, (y % 3).reshape(-1))[0] == "other"


def causal_obs(**kw):
    base = dict(model="LM", relation="next", calls=3, shifted=1.0, time_dim=1, length=16, cut=8, before=0.0,
                after=0.3)
    return causality.Observation(**{**base, **kw})


@pytest.mark.parametrize(("kw", "status"), [
    ({}, PASS),
    ({"before": 0.2}, FAIL),
    ({"before": 5e-7}, PASS),
    ({"after": 0.0}, CANNOT_TELL),
    ({"before": None, "problem": "RuntimeError: boom"}, CANNOT_TELL),
    ({"relation": "same"}, NOT_APPLICABLE),
    ({"relation": "", "model": ""}, NOT_APPLICABLE),
])
def test_causality_judge(kw, status):
    finding = causality.judge(causal_obs(**kw), RunFacts())
    assert finding.status == status
    if status == FAIL:
        for word in ("mask", "attention", "causal"):
            assert word not in finding.observed


@pytest.mark.parametrize(("kw", "status"), [
    ({"relation": "next"}, PASS),
    ({"relation": "same", "causal_dims": [1]}, FAIL),
    ({"relation": "same", "causal_dims": []}, NOT_APPLICABLE),  # an autoencoder sees the whole sequence
    ({"relation": "same", "causal_dims": None, "problem": "boom"}, CANNOT_TELL),
    ({"relation": "other"}, NOT_APPLICABLE),
])
def test_next_token_judge(kw, status):
    obs = next_token.Observation(**{"model": "LM", "calls": 3, "shifted": 0.05, "same": 1.0, **kw})
    finding = next_token.judge(obs, RunFacts())
    assert finding.status == status
    if status == FAIL:
        for word in ("shift", "target"):
            assert word not in finding.observed


def test_graph_span_fails_on_a_chain_and_passes_a_bounded_horizon():
    assert graph_span.judge(graph_span.Observation(list(range(12)), [n + 1 for n in range(12)]), RunFacts()).status == FAIL
    horizon = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]  # TBPTT(k1, k2): backpropagates three chunks, every chunk
    assert graph_span.judge(graph_span.Observation(horizon, [3] * 12), RunFacts()).status == PASS
    assert graph_span.judge(graph_span.Observation([0] * 3, [1] * 3), RunFacts()).status == NOT_APPLICABLE


def test_graph_span_counts_the_forwards_a_graph_reaches():
    a = torch.ones(2, requires_grad=True)
    first = a * 2
    first.grad_fn.metadata[graph_span.KEY] = 0
    second = first.exp()
    second.grad_fn.metadata[graph_span.KEY] = 1
    assert graph_span.span(second.sum().grad_fn) == ({0, 1}, False)


def test_tied_weights_copy_fails_and_tie_or_no_copy_passes():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)

    class LM(torch.nn.Module):
        def __init__(self, head_weight):
            super().__init__()
            self.emb, self.head = emb, head
            self.head.weight = head_weight

    def judged(model):
        obs = tied_weights.Observation()
        tied_weights.inspect(model, obs)
        return tied_weights.judge(obs, RunFacts()).status

    assert judged(LM(emb.weight)) == PASS
    assert judged(LM(torch.nn.Parameter(emb.weight.detach().clone()))) == FAIL
    assert judged(LM(torch.nn.Parameter(torch.randn(10, 4)))) == PASS  # untied: nothing is a copy
    obs = tied_weights.Observation()
    tied_weights.inspect(torch.nn.Linear(4, 2), obs)
    assert tied_weights.judge(obs, RunFacts()).status == NOT_APPLICABLE  # no embedding
