"""target-grad: the graph walk behind a loss's target, and the judge's rule; the checked fixtures
(tests/fixtures/target_grad__*.py) and the planted distillation script of the corpus run it end to end."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS
from checker.probes.target_grad import Observation, judge, leaves


def test_the_walk_finds_the_weights_behind_a_target_and_none_behind_a_detached_one():
    online = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    target = copy.deepcopy(online)
    x = torch.randn(3, 4)
    found = {id(t) for t in leaves(1.0 + 0.9 * target(x).max(dim=1).values)}
    assert found == {id(p) for p in target.parameters()}
    assert leaves(target(x).detach()) == []
    with torch.no_grad():
        assert leaves(target(x)) == []
    leaf = torch.zeros(3, requires_grad=True)  # a target that is itself a leaf requiring grad
    assert leaves(leaf) == [leaf]


def observed(**fields) -> Observation:
    return Observation(**{"losses": 500, "carrying": 500, "trained_weights": 2_600, **fields})


@pytest.mark.parametrize(("obs", "status"), [
    (Observation(), NOT_APPLICABLE),  # no loss function ran with autograd on
    (observed(carrying=0), PASS),  # every target computed without gradient
    (observed(unused_weights=2_600, unused_tensors=4), ADVICE),  # a target network as large as the trained one
    (observed(unused_weights=200, unused_tensors=1), ADVICE),  # a small teacher head: 7.7 % of the trained weights
    (observed(unused_weights=100, unused_tensors=1), PASS),  # 3.8 %: a stray scalar or bias, below 5 %
    (observed(applied_weights=2_600), PASS),  # both sides trained on purpose (a consistency loss)
])
def test_the_judge_advises_only_on_weights_no_optimizer_steps(obs, status):
    assert judge(obs, RunFacts()).status == status


def test_the_advice_names_the_measured_weights_and_the_remedy():
    finding = judge(observed(unused_weights=2_628, unused_tensors=4, trained_weights=2_628), RunFacts())
    assert finding.measured == "2,628 weights"
    assert "no_grad" in finding.message and "no_grad" not in finding.observed  # the symptom does not name the cause
