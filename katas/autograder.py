"""A Gradescope autograder for a kata or an interview task, and the grading it runs on each submission.

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) builds one image from a zip holding
``setup.sh`` and ``run_autograder``, then runs every submission in a container of its own, the student's files in
``/autograder/submission``, the zip's contents in ``/autograder/source``; ``run_autograder`` must write
``/autograder/results/results.json``. :func:`build` writes that bundle: the two scripts, this package (``lib/``),
its requirements, and ``kata.json``, what a submission must show (the kata's or the task's planted bugs gone, nothing
new broken, still training). ``python -m katas.autograder CONFIG SUBMISSION RESULTS`` grades one submission, as
``run_autograder`` calls it, and writes results whatever happened: a submission that is missing, crashes or hangs
scores 0 with the reason. Students see symptoms and figures, never the planted bugs' names or causes.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path

from checker.expectation import BugStatus, Expectation
from katas.workspace import write_text_atomically

SCHEMA = "torch-katas/autograder/1"
CONFIG = "kata.json"
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")  # Gradescope's visibility settings
SYMPTOM_POINTS, NEW_SYMPTOM_POINTS, TRAINS_POINTS = 3, 1, 1  # a kata's tests
PACKAGES = ("katas", "checker")  # copied into the bundle's lib/ from ROOT, the folder that holds them
ROOT = Path(__file__).resolve().parent.parent

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image: Python, CPU torch, torch-katas's
# requirements. The package itself travels in lib/ beside this file.
set -euo pipefail
apt-get install -y python3 python3-venv python3-pip
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -r /autograder/source/requirements.txt
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the check of the student's script, its results in results.json.
# AUTOGRADER_ROOT and AUTOGRADER_PYTHON let a simulated /autograder layout run it elsewhere.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
PYTHONPATH="$ROOT/source/lib" exec "$PYTHON" -m katas.autograder "$ROOT/source/kata.json" "$ROOT/submission" \\
    "$ROOT/results/results.json"
"""


class BundleError(ValueError):
    """What makes a bundle impossible (not a kata nor a task, a folder already holding files)."""


# -- the bundle ----------------------------------------------------------------------------------------------------

def config_of(target: Path, timeout: float, visibility: str, key_dir: Path | None = None) -> dict:
    """What a submission of ``target`` (a kata made by `kata new`, or an interview task's folder) must show."""
    from katas.bugs import BUGS
    from katas.interview.grade import BadKey, load_key, script_of
    from katas.workspace import read_metadata

    doc = {"schema": SCHEMA, "timeout": timeout, "visibility": visibility}
    if target.is_dir():
        try:
            key = load_key(key_dir or target / "key")
        except BadKey as exc:
            raise BundleError(f"{target} is not an interview task with its key ({exc})") from None
        from katas.catalogue import LAUNCHED

        return {**doc, "kind": "task", "script": script_of(target).name, "key": key,
                "nproc": LAUNCHED.get(key.get("reference"), 1)}
    info = read_metadata(target)
    if info is None or info.bug not in BUGS:
        raise BundleError(f"{target} is not a kata made by `kata new` (no readable metadata beside it)")
    return {**doc, "kind": "kata", "script": target.name, "probes": sorted(BUGS[info.bug].probes),
            "baseline": sorted(info.baseline), "nproc": info.nproc}



def build(target: Path, out: Path, timeout: float = 600, visibility: str = "visible",
          key_dir: Path | None = None) -> tuple[Path, dict]:
    """Write the bundle for ``target`` into the folder ``out`` (new, or empty); its zip and its config. The bundle
    is made beside ``out`` and moved there whole: a failure leaves nothing behind."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out} already holds files; name a new folder")
    config = config_of(target, timeout, visibility, key_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        files = work / "files"
        for package in PACKAGES:
            shutil.copytree(ROOT / package, files / "lib" / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (files / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        (files / "requirements.txt").write_text("\n".join(requirements()) + "\n")
        (files / "setup.sh").write_text(SETUP.replace("{torch}", torch_version()))
        (files / "run_autograder").write_text(RUN)
        (files / "run_autograder").chmod(0o755)
        archive = shutil.make_archive(str(work / "autograder"), "zip", root_dir=files)  # the files at the zip's root
        os.replace(archive, files / "autograder.zip")
        if out.exists():
            out.rmdir()
        os.replace(files, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out / "autograder.zip", config


def requirements() -> list[str]:
    """torch-katas's own requirements but torch (installed first, from the CPU index), extras left out."""
    required = metadata.requires("torch-katas") or []
    return [r for r in required if "extra ==" not in r and not r.startswith("torch")]


def torch_version() -> str:
    """The torch this machine has (its local label, like +cpu, dropped), read without importing it."""
    return metadata.version("torch").split("+")[0]


# -- grading one submission ----------------------------------------------------------------------------------------

def find_script(submission: Path, name: str) -> Path | None:
    """The submitted script: NAME at the submission's top, else the one .py file it holds anywhere."""
    if (submission / name).is_file():
        return submission / name
    found = sorted(p for p in submission.rglob("*.py") if p.is_file())
    return found[0] if len(found) == 1 else None


def grade_submission(config: dict, submission: Path) -> dict:
    """Gradescope's results for the submission in ``submission``, following ``config``."""
    started = time.monotonic()
    script = find_script(submission, config["script"])
    if script is None:
        results = {"score": 0, "output": f"No {config['script']} found in the submission (upload the script itself, "
                                          "named as it was handed out).", "tests": []}
    else:
        report = check(config, script)
        results = (kata_results if config["kind"] == "kata" else task_results)(config, report)
    results.update(execution_time=round(time.monotonic() - started), visibility=config["visibility"],
                   stdout_visibility="hidden")
    return results


def check(config: dict, script: Path):
    from katas.commands.common import limits_of, observe
    from katas.interview.grade import expectation

    expect = (Expectation(frozenset(config["probes"]), frozenset(config["baseline"])) if config["kind"] == "kata"
              else expectation(config["key"]))
    return observe(script, "cpu", limits_of(config["timeout"], 60, None), nproc=config["nproc"], expect=expect)


def ran_test(report) -> dict | None:
    """For a script that did not run to its end: the one failing test, with why (the score is then 0)."""
    if report.verdict.ran:
        return None
    return test("The script runs to its end", 0, 0, f"{report.problem}\n\n{report.detail}".strip(), passed=False)


def kata_results(config: dict, report) -> dict:
    """The kata's symptom gone earns its points; no new symptom and still training earn theirs only beside it (a
    submission that changed nothing earns nothing)."""
    tests = [ran] if (ran := ran_test(report)) else []
    statuses = report.statuses()
    fixed = report.verdict.ran and all(statuses.get(p) == "pass" for p in config["probes"])
    tests.append(test("The kata's symptom is gone", SYMPTOM_POINTS if fixed else 0, SYMPTOM_POINTS,
                      evidence([f for f in report.findings if f.probe in config["probes"]], report), fixed))
    later = "" if fixed else "\n(counts once the kata's symptom is gone)"
    new = new_symptoms(report, set(config["probes"]) | set(config["baseline"]))
    clean = report.verdict.ran and not new
    tests.append(test("No new symptom", NEW_SYMPTOM_POINTS if clean and fixed else 0, NEW_SYMPTOM_POINTS,
                      (evidence(new, report) or "none") + later, clean))
    trains = report.verdict.ran and statuses.get("health") == "pass"
    tests.append(test("The script still trains and learns", TRAINS_POINTS if trains and fixed else 0, TRAINS_POINTS,
                      evidence([f for f in report.findings if f.probe == "health"], report) + later, trains))
    return {"score": sum(t["score"] for t in tests), "output": summary(report), "tests": tests}


def task_results(config: dict, report) -> dict:
    from checker.probes import BY_ID
    from katas.bugs import BUGS
    from katas.interview.grade import Submission, grade
    from katas.interview.score import FIX, NEW_SYMPTOM

    key = config["key"]
    g = grade(Submission("submission", Path(report.script)), Path(report.script).parent, key, report)
    tests = [ran] if (ran := ran_test(report)) else []
    for number, bug in enumerate(g.bugs, 1):
        seen = " · ".join(BY_ID[p].symptom for p in BUGS[bug["id"]].probes if p in BY_ID)
        fixed = bug["status"] == BugStatus.FIXED and g.trains
        tests.append(test(f"Symptom {number}: {seen}", FIX if fixed else 0, FIX, str(bug["status"]), fixed))
    new = new_symptoms(report, {p for b in key["bugs"] for p in BUGS[b["id"]].probes})
    tests.append(test(f"No new symptom (each costs {NEW_SYMPTOM})", 0, 0, evidence(new, report) or "none",
                      report.verdict.ran and not new))
    tests.append(test("The script still trains and learns (fixes count only while it does)", 0, 0,
                      "yes" if g.trains else "no", g.trains))
    return {"score": max(0, g.score.points), "output": summary(report), "tests": tests}


def new_symptoms(report, known: set[str]) -> list:
    return [f for f in report.findings if f.failed and f.probe not in known and f.probe != "health"]


def evidence(findings: list, report) -> str:
    """What each check saw, as the student's `kata check` shows a kata: the symptom and its figures, no cause."""
    from checker.verdict import symptom_title

    lines = []
    for f in findings:
        figures = f" ({f.measured}; expected {f.threshold})" if f.measured and f.threshold else ""
        lines.append(f"{symptom_title(f.probe)}: {f.status}: {f.symptom}{figures}")
    if not report.verdict.ran and not lines:
        lines.append(f"not checked: {report.problem}")
    return "\n".join(lines)


def summary(report) -> str:
    line = f"kata check: {report.verdict}" + (f": {report.problem}" if report.problem else "")
    return line + "\nRun `kata check` on your script to see the same report with its evidence."


def test(name: str, score: float, max_score: float, output: str, passed: bool) -> dict:
    return {"name": name, "score": score, "max_score": max_score, "status": "passed" if passed else "failed",
            "output": output}


def main(argv: list[str]) -> int:
    """``CONFIG SUBMISSION RESULTS``: grade and write results; an internal failure still writes a result (score 0)."""
    config_path, submission, results_path = (Path(a) for a in argv)
    try:
        results = grade_submission(json.loads(config_path.read_text()), submission)
    except Exception:
        results = {"score": 0, "output": "The autograder failed; your instructor has the details.", "tests": [],
                   "stdout_visibility": "hidden"}
        traceback.print_exc()  # to /autograder/results/stdout, which only the instructor sees
    results_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(results_path, json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
