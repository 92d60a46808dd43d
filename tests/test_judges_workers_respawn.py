"""workers-respawn: the judge's rule on what the passes over each loader showed; the classifier kata's fixes and masks
(tests/kata_variants.py) and the corpus scripts with multi-worker loaders run it end to end."""
from __future__ import annotations

import pytest

from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS
from checker.probes.workers_respawn import Loader, Observation, judge


@pytest.mark.parametrize(("obs", "status"), [
    (Observation(), NOT_APPLICABLE),  # no loader iterated twice
    (Observation(in_main=1), PASS),  # loading in the main process: nothing to start
    (Observation([Loader(2, 4, 0, 0.0, 0.0)]), PASS),  # persistent: started once, kept for 4 passes
    (Observation([Loader(2, 4, 3, 0.03, 0.2)]), ADVICE),  # started anew at every pass
    (Observation([Loader(2, 2, 1, 0.001, 10.0)]), ADVICE),  # however small a share of the pass: the count decides
    (Observation([Loader(2, 5, 1, 0.03, 0.2)]), PASS),  # restarted once, then kept (a loader rebuilt mid-run)
    (Observation([Loader(2, 4, 0, 0.0, 0.0), Loader(4, 3, 2, 0.05, 0.3)]), ADVICE),  # the worst loader decides
])
def test_the_judge_advises_when_workers_restart_at_every_pass(obs, status):
    assert judge(obs, RunFacts()).status == status


def test_the_symptom_is_a_count_and_the_timing_only_goes_to_the_message():
    finding = judge(Observation([Loader(2, 4, 3, 0.031, 0.2)]), RunFacts())
    assert finding.measured == "4 starts" and finding.threshold == "1 start"
    assert "31 ms" in finding.message and "ms" not in finding.observed  # a timing would make kata texts vary
    assert "persistent_workers" not in finding.observed
