"""target-lag: the sampled comparison of a copy's weights with the trained ones, and the judge's thresholds; the
checked fixtures (tests/fixtures/target_lag__*.py) run it end to end."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS
from checker.probes._shared.copies import Copy, equal, same_storage
from checker.probes.target_lag import Observation, judge


def test_a_copy_is_equal_until_one_element_moves_and_shares_storage_only_when_aliased():
    online = nn.Linear(300, 300)
    target = copy.deepcopy(online)
    params, copies = list(online.parameters()), list(target.parameters())
    assert equal(copies, params) and not same_storage(copies, params)
    with torch.no_grad():
        target.weight.view(-1)[-1] += 1.0  # the last element is always in the sample
    assert not equal(copies, params)
    aliased = [p.detach() for p in params]
    assert equal(aliased, params) and same_storage(aliased, params)


@pytest.mark.parametrize(("updates", "record", "status"), [
    (500, Copy("Q", "", first=0, stretches=500, equal=500), FAIL),
    (500, Copy("Q", "", first=0, stretches=500, equal=449), PASS),  # lags in more than one update in ten
    (500, Copy("Q", "", first=0, stretches=500, equal=10), PASS),
    (500, Copy("Q", "", first=0, stretches=449, equal=449), NOT_APPLICABLE),  # runs between rounds of updates
    (30, Copy("Q", "", first=15, stretches=15, equal=15), NOT_APPLICABLE),  # too few updates since it first ran
])
def test_the_judge_fails_only_a_copy_that_runs_at_every_update_and_never_lags(updates, record, status):
    record.updates = updates
    assert judge(Observation([record]), RunFacts()).status == status


def test_the_failure_says_how_the_copy_came_to_equal_the_trained_weights():
    aliased = judge(Observation([Copy("Q", "", 0, 100, 100, 100, shared=True)]), RunFacts())
    synced = judge(Observation([Copy("Q", "", 0, 100, 100, 100)]), RunFacts())
    assert "storage" in aliased.message and "storage" not in synced.message
    assert "after every update" in synced.message


def test_no_copy_is_not_applicable():
    assert judge(Observation([]), RunFacts()).status == NOT_APPLICABLE
