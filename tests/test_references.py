"""The reference scripts are correct: every probe passes or does not apply, run after run."""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REFERENCES, WORKERS, check, failed_probes, ranks_of
from layout import assert_laid_out

from checker.findings import NOT_APPLICABLE, PASS
from checker.probes import PROBES
from checker.runner import Limits, run
from checker.verdict import judge
from katas.catalogue import measured
from katas.observation import Measured

SCRIPTS = sorted(REFERENCES.glob("*.py"))
RUNS = 3


def cold_check(path):
    """Exactly what `kata check` runs: a fresh process that imports torch (a distributed script: PyTorch's launcher
    starting a fresh process per rank)."""
    return judge(run(path, nproc=ranks_of(path)), str(path), "cpu", Limits())


@pytest.fixture(scope="module")
def reports():
    """Every reference, RUNS times, side by side: once as `kata check` runs it, then forked from a warm server
    (the test suite's way, which must not change a verdict)."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = list(pool.map(lambda job: job[0](job[1]),
                             [(cold_check if i == 0 else check, path) for i in range(RUNS) for path in SCRIPTS]))
    return {path: done[i::len(SCRIPTS)] for i, path in enumerate(SCRIPTS)}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_reference_passes_every_probe_three_times_with_the_same_verdict(script, reports):
    runs = reports[script]
    for report in runs:
        assert report.verdict == "pass", f"{report.problem}\n{report.detail}\n" + "\n".join(
            f"{f.probe}: {f.status} {f.message}" for f in report.findings)
        assert not failed_probes(report)
        assert all(f.status in (PASS, NOT_APPLICABLE) for f in report.findings)
    verdicts = [[(f.probe, f.status, f.measured) for f in r.findings] for r in runs]
    assert verdicts[0] == verdicts[1] == verdicts[2]


def test_a_reference_s_report_is_a_few_lines_at_any_width(reports):
    for runs in reports.values():
        assert_laid_out(runs[0])


def test_the_correct_runs_that_measured_difficulties_compare_with_are_what_each_run_shows(reports):
    """What katas/measured.json keeps of each reference's run (the figures it prints, its loss), the same in every
    run: `kata new` compares a kata's run with it."""
    stored = measured()["references"]
    for script, runs in reports.items():
        for report in runs:
            fresh = Measured.of(report).to_json()
            assert {k: v for k, v in fresh.items() if k != "seconds"} == \
                {k: v for k, v in stored[script.stem].items() if k != "seconds"}, script.name


def test_every_probe_is_exercised_by_some_reference(reports):
    """The references are the kata sources: each probe must judge (not say 'not applicable') on at least one."""
    judged = {f.probe for runs in reports.values() for f in runs[0].findings if f.status != NOT_APPLICABLE}
    assert {probe.id for probe in PROBES} - judged == set()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """Each reference run as a learner would, with plain Python, side by side."""
    def plain(script):
        ranks = ranks_of(script)
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"] if ranks > 1 else []
        return subprocess.run([sys.executable, *launcher, str(script)], cwd=tmp_path_factory.mktemp(script.stem),
                              capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(SCRIPTS, pool.map(plain, SCRIPTS)))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_reference_runs_on_its_own_and_learns(script, standalone):
    out = standalone[script]
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines and all(line.startswith("epoch ") for line in lines)
    if "accuracy " in lines[-1]:  # the data-parallel reference prints the validation accuracy over all ranks
        assert float(lines[-1].split("accuracy ")[1]) > 0.9
        return
    if "return " in lines[-1]:  # a reinforcement learner prints its greedy policy's return: it must climb clearly
        first, last = (float(line.split("return ")[1].split()[0]) for line in (lines[0], lines[-1]))
        assert last > 1.5 * first
        return
    if "acc " not in lines[-1]:  # a language model prints losses only: its validation loss must fall clearly
        first, last = (float(line.split("val ")[1].split()[0]) for line in (lines[0], lines[-1]))
        assert last < 0.6 * first
        return
    final_accuracy = float(lines[-1].split("acc ")[1].split()[0])
    assert final_accuracy > 0.9
