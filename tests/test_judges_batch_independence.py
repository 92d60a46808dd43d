"""batch-independence: the judge on hand-made observations."""
from __future__ import annotations

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import batch_independence


def judge(**fields):
    base = dict(model="Tagger", samples=32, scale=1.2)
    return batch_independence.judge(batch_independence.Observation(**{**base, **fields}), RunFacts())


def test_no_change_passes_a_change_relative_to_the_outputs_fails():
    assert judge(change=0.0).status == PASS
    finding = judge(change=0.5)
    assert finding.status == FAIL and finding.measured == "0.42"
    for word in ("view", "transpose", "reshape"):
        assert word not in finding.observed
    assert judge(change=1e-4).status == CANNOT_TELL


def test_premises():
    assert judge(model="").status == NOT_APPLICABLE
    assert judge(samples=1).status == NOT_APPLICABLE
    assert judge(per_sample=False).status == NOT_APPLICABLE
    assert judge(batch_dependent="bn normalises with batch statistics").status == CANNOT_TELL
    assert judge(problem="the model's forward failed on the copy").status == CANNOT_TELL
