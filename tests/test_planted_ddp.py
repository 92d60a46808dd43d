"""Every bug that applies to the Trainer-style data-parallel corpus script, planted by its operator (the
data-parallel bugs with three seeds), trips its probes there when the script runs as two ranks, and nothing else
but the health gate: the data-parallel bugs work on a script written unlike the ``ddp`` reference."""
from __future__ import annotations

import hashlib

import pytest
from conftest import check_all, course_of, failed_probes, plant_all, verdict_for
from test_corpus import CORPUS

from katas.bugs import BUGS
from katas.engine.context import Context
from katas.engine.inject import sites

SCRIPT = CORPUS / "ddp_trainer.py"
DISTRIBUTED = [bug for bug in BUGS.values() if bug.id.startswith("ddp-")]
CASES = [(bug, seed) for bug in BUGS.values() if sites(bug, Context.of(SCRIPT.read_text()))
         for seed in ((0, 1, 2) if bug in DISTRIBUTED else (0,))]
# Not silent under DDP: a part cut from the loss's graph leaves parameters without gradient, and DDP (without
# find_unused_parameters) raises at the next forward. The error is what the learner sees.
RAISES = {"detach": "RuntimeError: Expected to have finished reduction in the prior iteration"}
# Harmless here: each rank's validation shard is one batch (128 of the 256 samples at eval_batch_size 128), so the
# count overwritten at each batch is the whole count, and the printed accuracy is right: nothing may fail.
INERT = {"metric-overwrite"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted-ddp")
    paths = {}
    for (bug, seed), source in zip(CASES, plant_all([(bug.id, SCRIPT, seed) for bug, seed in CASES])):
        path = folder / f"{bug.id}-{hashlib.sha1(source.encode()).hexdigest()[:8]}.py"
        path.write_text(source)
        paths[bug.id, seed] = path
    checked = check_all(sorted(set(paths.values())))
    return {case: checked[path] for case, path in paths.items()}


def test_every_data_parallel_bug_applies_to_the_trainer_script():
    assert {bug.id for bug, _ in CASES} >= {bug.id for bug in DISTRIBUTED}


@pytest.mark.parametrize(("bug", "seed"), CASES, ids=lambda v: getattr(v, "id", v))
def test_planted_bug_trips_its_probes_on_two_ranks(bug, seed, reports):
    report = reports[bug.id, seed]
    assert report.nproc == 2, report.problem
    if bug.id in RAISES:
        assert report.verdict == "script-failed" and RAISES[bug.id] in report.problem, report.problem
        return
    details = "\n".join(f"{f.probe}: {f.status} {f.message}" for f in report.findings)
    failed = failed_probes(report)
    if bug.id in INERT:
        assert report.verdict == "pass" and not failed, details
        return
    assert report.verdict == verdict_for(report) and failed, f"{report.problem}\n{report.detail}\n{details}"
    assert set(bug.probes) <= failed <= {*bug.probes, *course_of(failed)}, details
