"""The reference scripts are correct: every probe passes or does not apply, run after run."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REFERENCES, failed_probes

from checker.findings import NOT_APPLICABLE, PASS
from checker.runner import Limits, run
from checker.verdict import judge

SCRIPTS = sorted(REFERENCES.glob("*.py"))
RUNS = 3


def cold_check(path):
    """The references go through exactly what `kata check` runs: a fresh process each time."""
    return judge(run(path), str(path), "cpu", Limits())


@pytest.fixture(scope="module")
def reports():
    runs = [{path: cold_check(path) for path in SCRIPTS} for _ in range(RUNS)]
    return {path: [run[path] for run in runs] for path in SCRIPTS}


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


def test_classifier_exercises_every_probe(reports):
    """The classifier is the kata source for every bug: no probe may be 'not applicable' on it."""
    report = reports[REFERENCES / "classifier.py"][0]
    assert [f.probe for f in report.findings if f.status == NOT_APPLICABLE] == []


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_reference_runs_on_its_own_and_learns(script, tmp_path):
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines and all(line.startswith("epoch ") for line in lines)
    final_accuracy = float(lines[-1].split("acc ")[1].split()[0])
    assert final_accuracy > 0.9
