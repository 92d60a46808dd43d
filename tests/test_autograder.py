"""`kata autograder`: a Gradescope bundle, run on a simulated /autograder layout for a passing, a failing, a crashing
and a missing submission, its results.json held to the fields Gradescope documents."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REFERENCES

from katas.bugs import BUGS
from katas.cli import main

# https://gradescope-autograders.readthedocs.io/en/latest/specs/ : the fields of results.json, each with its type
RESULT_FIELDS = {"score": (int, float), "execution_time": (int, float), "output": str, "output_format": str,
                 "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
                 "extra_data": dict, "tests": list, "leaderboard": list}
TEST_FIELDS = {"score": (int, float), "max_score": (int, float), "status": str, "name": str, "name_format": str,
               "number": str, "output": str, "output_format": str, "tags": list, "visibility": str,
               "extra_data": dict}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def validate(results: dict) -> None:
    """As Gradescope reads results.json: known fields of the documented types, a score for the submission, each
    test's score within its maximum."""
    assert set(results) <= set(RESULT_FIELDS), set(results) - set(RESULT_FIELDS)
    for name, value in results.items():
        assert isinstance(value, RESULT_FIELDS[name]), name
    assert "score" in results or all("score" in t for t in results["tests"])
    for field in ("visibility", "stdout_visibility"):
        assert results.get(field, "visible") in VISIBILITY
    for t in results["tests"]:
        assert set(t) <= set(TEST_FIELDS), set(t) - set(TEST_FIELDS)
        for name, value in t.items():
            assert isinstance(value, TEST_FIELDS[name]), name
        assert t.get("status", "passed") in ("passed", "failed")
        assert 0 <= t["score"] <= t["max_score"] or t["max_score"] == 0 == t["score"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> tuple[Path, Path]:
    """(the kata, its bundle unpacked as Gradescope unpacks it into /autograder/source)."""
    root = tmp_path_factory.mktemp("course")
    made = CliRunner().invoke(main, ["new", "--plain", "--bug", "zero-grad", "--ref", "binary", "--seed", "1",
                                     "--dir", str(root / "katas")])
    assert made.exit_code == 0, made.output
    kata = root / "katas" / "01.py"
    built = CliRunner().invoke(main, ["autograder", str(kata), "--out", str(root / "bundle"), "--timeout", "120"])
    assert built.exit_code == 0, built.output
    assert "total points to 5" in built.output
    with zipfile.ZipFile(root / "bundle" / "autograder.zip") as archive:
        assert {"setup.sh", "run_autograder", "kata.json"} <= set(archive.namelist())  # at the zip's root
        archive.extractall(root / "autograder" / "source")
    return kata, root / "autograder"


def autograde(layout: Path, files: dict[str, str]) -> dict:
    """Run the bundle's run_autograder on a submission of ``files``, as Gradescope would, and read its results."""
    submission = layout / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    shutil.rmtree(layout / "results", ignore_errors=True)
    submission.mkdir()
    for name, text in files.items():
        (submission / name).write_text(text)
    env = dict(os.environ, AUTOGRADER_ROOT=str(layout), AUTOGRADER_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)  # the bundle's own copy of the package must be what runs
    done = subprocess.run(["bash", str(layout / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((layout / "results" / "results.json").read_text())
    validate(results)
    return results


def told(results: dict) -> str:
    return json.dumps(results).lower()


def test_a_correct_fix_scores_full_marks_and_the_results_never_name_the_bug(bundle):
    kata, layout = bundle
    results = autograde(layout, {"01.py": (REFERENCES / "binary.py").read_text()})
    assert results["score"] == 5 == sum(t["max_score"] for t in results["tests"])
    assert all(t["status"] == "passed" for t in results["tests"])
    bug = BUGS["zero-grad"]
    assert "zero-grad" not in told(results) and bug.title.lower() not in told(results)


def test_the_kata_handed_back_unchanged_scores_nothing_and_says_what_is_still_seen(bundle):
    kata, layout = bundle
    results = autograde(layout, {"01.py": kata.read_text()})
    assert results["score"] == 0
    symptom = next(t for t in results["tests"] if t["name"] == "The kata's symptom is gone")
    assert symptom["status"] == "failed" and "fail" in symptom["output"]
    assert "zero-grad" not in told(results)


def test_a_crashing_submission_scores_nothing_with_its_error_and_a_missing_one_says_what_to_upload(bundle):
    kata, layout = bundle
    results = autograde(layout, {"01.py": "import torch\nraise RuntimeError('half-finished edit')\n"})
    assert results["score"] == 0
    assert results["tests"][0]["status"] == "failed" and "half-finished edit" in results["tests"][0]["output"]
    results = autograde(layout, {"notes.txt": "I ran out of time"})
    assert results["score"] == 0 and "No 01.py found" in results["output"]


def test_a_submission_under_another_name_is_found_when_it_is_the_only_script(bundle):
    kata, layout = bundle
    results = autograde(layout, {"my_fix.py": (REFERENCES / "binary.py").read_text()})
    assert results["score"] == 5


def test_setup_installs_the_cpu_build_of_this_machines_torch_and_is_valid_bash(bundle):
    kata, layout = bundle
    setup = layout / "source" / "setup.sh"
    assert subprocess.run(["bash", "-n", str(setup)]).returncode == 0
    version = metadata.version("torch").split("+")[0]
    assert f"torch=={version} --index-url https://download.pytorch.org/whl/cpu" in setup.read_text()


def test_a_bundle_is_never_written_over_files_and_a_script_that_is_no_kata_is_refused(bundle, tmp_path):
    kata, layout = bundle
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["autograder", str(kata), "--out", str(taken)])
    assert result.exit_code == 2 and "already holds files" in result.output
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
    plain = tmp_path / "train.py"
    plain.write_text((REFERENCES / "binary.py").read_text())
    result = CliRunner().invoke(main, ["autograder", str(plain), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "not a kata" in result.output
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
