"""`kata check --junit FILE`: the report as JUnit XML, read back as CI reads it (junitparser)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ROOT
from junitparser import Error, Failure, JUnitXml, Skipped, SystemOut

from katas.cli import main

JOBS = ROOT / "tests" / "jobs"


def kata(*args: str):
    return CliRunner().invoke(main, list(args))


def suite_of(path):
    suites = list(JUnitXml.fromfile(str(path)))
    assert len(suites) == 1
    return suites[0]


def outcome(case) -> str:
    kinds = {Failure: "failure", Error: "error", Skipped: "skipped"}
    results = [kinds[type(r)] for r in case.result if type(r) in kinds]
    return results[0] if results else "passed"


EXPECTED = {"fail": "failure", "error": "error", "n/a": "skipped", "cannot-tell": "skipped", "pass": "passed",
            "advice": "passed"}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    xml = tmp_path_factory.mktemp("junit") / "kata.xml"
    result = kata("check", "--json", "--junit", str(xml), str(JOBS / "endless_accumulates.py"), "--steps", "40",
                  "--", "--width", "16")
    return result.exit_code, json.loads(result.output), suite_of(xml)


def test_a_symptom_is_a_failure_whose_message_is_what_was_seen_and_whose_text_is_its_evidence(planted):
    code, doc, suite = planted
    assert code == 1
    failures = [case for case in suite if outcome(case) == "failure"]
    assert [case.name.split(":")[0] for case in failures] == ["grads-accumulate"]
    [failure] = [r for r in failures[0].result if isinstance(r, Failure)]
    [probe] = [p for p in doc["probes"] if p["probe"] == "grads-accumulate"]
    assert failure.message == probe["observed"]
    assert f"measured {probe['measured']}; expected {probe['threshold']}" in failure.text


def test_every_check_is_a_case_with_the_outcome_its_status_means_and_the_counts_add_up(planted):
    code, doc, suite = planted
    cases = {case.name.split(":")[0]: case for case in suite}
    assert outcome(cases["the script runs as a training script"]) == "passed"
    for probe in doc["probes"]:
        assert outcome(cases[probe["probe"]]) == EXPECTED[probe["status"]], probe["probe"]
    assert suite.tests == len(doc["probes"]) + 1
    assert suite.failures == 1 and suite.errors == 0
    assert suite.skipped == sum(p["status"] in ("n/a", "cannot-tell") for p in doc["probes"])


def test_a_crash_fails_the_run_case_and_output_with_control_characters_stays_valid_xml(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text("import torch\nprint('\\x1b[31mred\\x07 bell')\nraise RuntimeError('shape mismatch')\n")
    xml = tmp_path / "kata.xml"
    result = kata("check", "--junit", str(xml), str(script))
    assert result.exit_code == 3
    suite = suite_of(xml)
    run = next(case for case in suite if case.name == "the script runs as a training script")
    [failure] = [r for r in run.result if isinstance(r, Failure)]
    assert failure.type == "script-failed" and "shape mismatch" in failure.text
    assert "red" in suite.child(SystemOut).text  # the output tail, its escape and bell characters replaced


def test_a_junit_file_that_would_overwrite_the_script_is_refused_and_the_script_kept(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('not judged')\n")
    result = kata("check", "--junit", str(script), str(script))
    assert result.exit_code == 2
    assert "overwrite the script" in result.output
    assert script.read_text() == "print('not judged')\n"
