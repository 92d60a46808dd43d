"""The Python API (`from katas import check`) and the pytest plugin's `kata_check` fixture: a smoke test of one's
own training code, in a program or a test suite."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import ROOT

from checker.exits import Verdict
from checker.findings import FAIL, PASS
from katas import check

JOBS = ROOT / "tests" / "jobs"
WIDTH = ["--width", "16"]


@pytest.fixture(scope="module")
def accumulating():
    return check(JOBS / "endless_accumulates.py", steps=40, args=WIDTH, timeout=120)


def test_the_api_judges_an_endless_job_on_a_prefix_run_with_its_own_arguments():
    report = check(str(JOBS / "endless.py"), steps=40, args=WIDTH, timeout=120)
    assert report.clean, report.summary()
    report.assert_clean()
    assert report.prefix["updates"] == 40
    assert report.finding("grads-accumulate").status == PASS
    assert report.to_json()["prefix"]["reached"] is True


def test_a_planted_bug_fails_assert_clean_with_the_symptom_and_its_evidence(accumulating):
    assert not accumulating.clean
    assert [f.probe for f in accumulating.failures] == ["grads-accumulate"]
    assert accumulating.finding("grads-accumulate").status == FAIL
    with pytest.raises(AssertionError) as raised:
        accumulating.assert_clean()
    text = str(raised.value)
    assert "grads-accumulate" in text and "expected" in text  # the check, then its measured figure against the bar


def test_a_check_is_found_by_its_probe_or_its_symptom_and_a_misspelt_one_suggests_the_right_one(accumulating):
    found = accumulating.finding("grads-accumulate")
    from checker.probes import BY_ID

    assert accumulating.finding(BY_ID["grads-accumulate"].symptom_id) is found
    with pytest.raises(KeyError, match="did you mean `grads-accumulate`"):
        accumulating.finding("grads-acumulate")


def test_a_script_that_cannot_run_gives_a_report_that_says_why_and_is_never_clean(tmp_path):
    report = check(tmp_path / "missing.py")
    assert not report.ran and report.verdict == Verdict.USAGE
    with pytest.raises(AssertionError, match="missing.py"):
        report.assert_clean()


@pytest.mark.parametrize("call, error", [
    (lambda: check(JOBS / "endless.py", module="pkg.train"), "not both"),
    (lambda: check(JOBS / "endless.py", args="--width 16"), "sequence"),
    (lambda: check(JOBS / "endless.py", steps=0), "at least 1"),
    (lambda: check(module="no_such.module"), "no module `no_such.module`"),
    (lambda: check(), "give the script"),
    (lambda: check(JOBS / "endless.py", device="tpu"), "device"),
])
def test_arguments_that_contradict_each_other_raise_before_anything_runs(call, error):
    with pytest.raises((ValueError, TypeError), match=error):
        call()


def test_the_fixture_finds_a_script_from_the_rootdir_wherever_pytest_runs(kata_check, monkeypatch):
    monkeypatch.chdir(JOBS)  # the fixture finds scripts from the rootdir (this repository), wherever pytest runs
    report = kata_check("tests/jobs/endless.py", steps=20, args=WIDTH, timeout=120)
    report.assert_clean()
    assert os.getcwd() == str(JOBS)


SUITE = '''
def test_clean(kata_check):
    kata_check("endless.py", steps=20, args=["--width", "16"]).assert_clean()


def test_planted(kata_check):
    kata_check("endless_accumulates.py", steps=20, args=["--width", "16"]).assert_clean()
'''


def test_a_users_own_suite_gets_the_fixture_from_the_installed_plugin_and_ci_reads_its_outcome(tmp_path):
    for name in ("endless.py", "endless_accumulates.py", "helper.py"):
        shutil.copy(JOBS / name, tmp_path / name)
    (tmp_path / "test_training.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=out.xml"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    cases = {case.get("name"): case for case in ET.parse(tmp_path / "out.xml").getroot().iter("testcase")}
    assert cases["test_clean"].find("failure") is None
    failure = cases["test_planted"].find("failure")
    assert failure is not None and "grads-accumulate" in failure.get("message")
