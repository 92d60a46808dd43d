"""`kata check` on real training jobs: a prefix of a job that runs for hours (--steps, --epochs), the script's own
arguments after `--`, a module run with -m, modules and packages of the job's own."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REFERENCES, ROOT, course_of
from documented_json import validate

from checker.plan import Plan
from katas.bugs import BUGS
from katas.cli import main

JOBS = ROOT / "tests" / "jobs"


def kata(*args: str):
    return CliRunner().invoke(main, list(args))


def checked_json(*args: str) -> tuple[int, dict]:
    result = kata("check", "--json", *args)
    doc = json.loads(result.output)
    validate(doc)  # the documented shape (docs/json.md), prefix included
    return result.exit_code, doc


def failing(doc: dict) -> set[str]:
    return {p["probe"] for p in doc["probes"] if p["status"] in ("fail", "error")}


def test_an_endless_trainer_is_judged_on_its_first_steps_with_its_own_arguments():
    code, doc = checked_json(str(JOBS / "endless.py"), "--steps", "40", "--timeout", "120", "--", "--width", "16")
    assert code == 0, doc["problem"]
    assert doc["prefix"] == {"asked": "--steps 40", "reached": True, "updates": 40, "passes": 0}
    assert any("first 40 updates" in note for note in doc["notes"])


def test_a_bug_in_an_endless_trainer_is_found_in_its_first_steps():
    code, doc = checked_json(str(JOBS / "endless_accumulates.py"), "--steps", "40", "--", "--width", "16")
    assert code == 1
    assert failing(doc) == {"grads-accumulate"}


def test_the_scripts_own_options_before_the_separator_are_refused_with_the_way_to_pass_them():
    result = kata("check", str(JOBS / "endless.py"), "--width", "16")
    assert result.exit_code == 2
    assert "go after --" in result.output


def test_a_script_missing_its_required_argument_fails_as_it_would_alone():
    code, doc = checked_json(str(JOBS / "endless.py"), "--steps", "5")
    assert code == 3
    assert "SystemExit" in doc["problem"] or "exited with status 2" in doc["problem"]


def test_epochs_stops_where_the_next_pass_would_begin_after_the_evaluation_between_them():
    code, doc = checked_json(str(JOBS / "epochs.py"), "--epochs", "2")
    assert code == 0, doc["problem"]
    assert doc["prefix"] == {"asked": "--epochs 2", "reached": True, "updates": 24, "passes": 2}
    assert "epoch 1  val acc" in doc["output_tail"] and "epoch 2" not in doc["output_tail"]


def test_a_script_that_ends_before_its_prefix_is_judged_whole():
    code, doc = checked_json(str(JOBS / "epochs.py"), "--epochs", "5", "--", "--epochs", "2")
    assert code == 0, doc["problem"]
    assert doc["prefix"]["reached"] is False and doc["prefix"]["passes"] == 2
    assert any("ended by itself before --epochs 5" in note for note in doc["notes"])


def test_the_scripts_own_except_exception_does_not_swallow_the_stop():
    code, doc = checked_json(str(JOBS / "catches_everything.py"), "--steps", "25")
    assert code == 0, doc["problem"]
    assert doc["prefix"]["updates"] == 25
    assert "retrying" not in doc["output_tail"]


def test_a_job_of_ten_thousand_epochs_is_judged_on_its_first_200_updates_in_seconds():
    code, doc = checked_json(str(JOBS / "epochs.py"), "--steps", "200")
    assert code == 0, doc["problem"]
    # 12 updates a pass: the 200th came in the 17th pass, stopped where its next step would begin
    assert doc["prefix"] == {"asked": "--steps 200", "reached": True, "updates": 200, "passes": 17}


def test_epochs_counts_passes_over_loaders_made_anew_for_every_epoch():
    code, doc = checked_json(str(JOBS / "fresh_loaders.py"), "--epochs", "2")
    assert code == 0, [(p["probe"], p["message"]) for p in doc["probes"] if p["status"] == "fail"]
    assert doc["prefix"] == {"asked": "--epochs 2", "reached": True, "updates": 24, "passes": 2}
    assert "epoch 1 acc" in doc["output_tail"] and "epoch 2" not in doc["output_tail"]


def test_modules_of_the_users_named_like_the_checkers_or_the_standard_librarys_shadow_nothing(tmp_path):
    import subprocess
    import sys

    for name in ("checker", "katas", "json", "runpy"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the user\\'s {name}.py was imported')\n")
    (tmp_path / "train.py").write_text((JOBS / "fresh_loaders.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    kata_command = str(Path(sys.executable).parent / "kata")  # the installed command, as users run it
    done = subprocess.run([kata_command, "check", "train.py", "--epochs", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_kata_made_from_a_script_that_imports_its_neighbours_runs_wherever_it_is_written(tmp_path):
    made = kata("new", "--from", str(JOBS / "sibling" / "train.py"), "--bug", "zero-grad", "--dir", str(tmp_path / "k"))
    assert made.exit_code == 0, made.output
    code, doc = checked_json(str(tmp_path / "k" / "01.py"))
    assert code == 1, doc["problem"]
    assert doc["kata"]["injected_bug"] == "still present"


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def test_a_job_reads_its_config_from_where_it_is_run_and_its_writes_never_reach_that_folder(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "configs").mkdir(parents=True)
    (project / "configs" / "small.json").write_text(json.dumps({"width": 16, "lr": 0.1, "epochs": 3}))
    (project / "runs").mkdir()
    (project / "runs" / "stale.txt").write_text("from an earlier run\n")
    (project / "train.log").write_text("from an earlier run\n")
    (project / "checkpoint.pt").write_bytes(b"an earlier checkpoint")
    (project / "train.py").write_text((JOBS / "configured" / "train.py").read_text())
    before = snapshot(project)
    monkeypatch.chdir(project)
    code, doc = checked_json("train.py", "--", "--config", "configs/small.json")
    assert code == 0, doc["problem"] + doc["detail"]
    assert "final loss" in doc["output_tail"]  # every write read back as written, in the script's own asserts
    assert snapshot(project) == before


def test_a_module_runs_as_python_dash_m_from_the_current_folder(monkeypatch):
    monkeypatch.chdir(JOBS / "project")
    code, doc = checked_json("-m", "pkg.train", "--steps", "30", "--", "--width", "8")
    assert code == 0, doc["problem"]
    assert doc["prefix"]["updates"] == 30
    assert Path(doc["script"]).resolve() == (JOBS / "project" / "pkg" / "train.py").resolve()


def test_an_unknown_module_is_a_usage_error_that_says_where_it_looked(monkeypatch):
    monkeypatch.chdir(JOBS / "project")
    result = kata("check", "-m", "pkg.trian")
    assert result.exit_code == 2
    assert "pkg/trian.py" in result.output


def test_the_plain_report_says_what_the_prefix_covered_and_the_command_to_run_again():
    result = kata("check", str(JOBS / "endless.py"), "--steps", "20", "--", "--width", "16")
    assert result.exit_code == 0, result.output
    assert "first 20 updates" in result.output


# Each reference judged on a prefix shorter than its run (40 of its 48 or 64 updates, two of its three epochs, 20 of
# its updates) passes, and a bug planted in it is found there by the probes the catalogue names for it.
PREFIX = {"classifier": Plan(steps=40), "binary": Plan(steps=40), "text": Plan(epochs=2), "lm": Plan(steps=20)}
PLANTED = [("classifier", "zero-grad"), ("classifier", "clip-order"), ("classifier", "worker-seed"),
           ("binary", "detach"), ("text", "pad-loss"), ("text", "accum-scale"), ("lm", "causal-mask"),
           ("lm", "no-shift")]


@pytest.fixture(scope="module")
def prefix_reports(tmp_path_factory):
    from conftest import check, plant_all

    folder = tmp_path_factory.mktemp("prefix")
    sources = plant_all([(bug, REFERENCES / f"{ref}.py", 0) for ref, bug in PLANTED])
    jobs = [(ref, None, REFERENCES / f"{ref}.py") for ref in PREFIX]
    for (ref, bug), source in zip(PLANTED, sources):
        path = folder / f"{ref}-{bug}.py"
        path.write_text(source)
        jobs.append((ref, bug, path))
    from concurrent.futures import ThreadPoolExecutor

    from conftest import WORKERS

    with ThreadPoolExecutor(WORKERS) as pool:
        reports = pool.map(lambda job: check(job[2], plan=PREFIX[job[0]]), jobs)
    return {(ref, bug): report for (ref, bug, _), report in zip(jobs, reports)}


@pytest.mark.parametrize("ref", sorted(PREFIX))
def test_a_reference_judged_on_a_prefix_passes(ref, prefix_reports):
    report = prefix_reports[ref, None]
    assert report.verdict == "pass", report.problem
    assert report.prefix["reached"] and report.prefix["updates"] > 0


@pytest.mark.parametrize(("ref", "bug"), PLANTED)
def test_a_bug_planted_in_a_reference_is_found_on_a_prefix(ref, bug, prefix_reports):
    report = prefix_reports[ref, bug]
    assert report.prefix["reached"], report.problem
    failed = {f.probe for f in report.findings if f.failed}
    details = [(f.probe, f.message) for f in report.findings if f.failed]
    assert set(BUGS[bug].probes) <= failed <= {*BUGS[bug].probes, *course_of(failed)}, details
