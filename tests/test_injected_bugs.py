"""Every bug, planted in every reference it applies to, with three seeds, shows its symptom when run."""
from __future__ import annotations

import hashlib

import pytest
from conftest import FIXTURES, REFERENCES, check_all, course_of, failed_probes, plant_all, verdict_for

from katas.bugs import BUGS
from katas.catalogue import measured
from katas.engine.context import Context
from katas.engine.inject import sites
from katas.observation import Measured, describe

SEEDS = (0, 1, 2)
CASES = [(ref, bug, seed) for ref in sorted(REFERENCES.glob("*.py")) for bug in BUGS.values()
         if sites(bug, Context.of(ref.read_text())) for seed in SEEDS]
# Scripts written unlike the references (a Trainer class with attributes, a loop with no functions).
OTHERS = [FIXTURES / "general__trainer_class.py", FIXTURES / "general__plain_loop.py"]
OTHER_CASES = [(script, bug, 0) for script in OTHERS for bug in BUGS.values() if sites(bug, Context.of(script.read_text()))]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Plant every case, check each distinct script once, side by side."""
    folder = tmp_path_factory.mktemp("injected")
    scripts = {}
    sources = plant_all([(bug.id, ref, seed) for ref, bug, seed in CASES + OTHER_CASES])
    for (ref, bug, seed), source in zip(CASES + OTHER_CASES, sources):
        path = folder / f"{ref.stem}-{hashlib.sha1(source.encode()).hexdigest()[:10]}.py"
        path.write_text(source)
        scripts[ref, bug.id, seed] = path
    checked = check_all(sorted(set(scripts.values())))
    return {case: checked[path] for case, path in scripts.items()}


def test_every_bug_applies_to_some_reference():
    assert {bug.id for _, bug, _ in CASES} == set(BUGS)


def test_bugs_apply_to_scripts_written_differently():
    applied = {(script.stem, bug.id) for script, bug, _ in OTHER_CASES}
    assert {("general__trainer_class", "zero-grad"), ("general__trainer_class", "eval-mode"),
            ("general__trainer_class", "train-mode"), ("general__plain_loop", "zero-grad")} <= applied


# The bugs whose planted reference fails the health gate too, as measured: everywhere, or on the named references.
BREAKS_TRAINING: dict[str, bool | tuple[str, ...]] = {
    "label-shift": True,
    "log0": True,
    "accum-sched": True,
    "untied": True,  # the copy is taken before the embedding's own initialisation, which it then misses
    "zero-grad": ("ddp",),  # SGD with momentum on the summed gradients diverges there
    "no-step": True,
    # every step finds the gradients reset: nothing is learned; health does not see it on meta (its meta-loss's
    # fall is not judged) nor on rl (a Q-learner's loss need not fall), where weights-update does
    "zero-order": ("binary", "classifier", "ddp", "lm"),
    "shape-broadcast": True,
    "softmax-ce": ("lm",),
    "lr-high": ("binary", "classifier", "ddp", "text"),  # on the LM the loss climbs, then falls back below ln(k)
}


def breaks_training(bug: str, reference: str) -> bool:
    breaks = BREAKS_TRAINING.get(bug, False)
    return reference in breaks if isinstance(breaks, tuple) else breaks


@pytest.mark.parametrize(("script", "bug", "seed"), OTHER_CASES, ids=lambda v: getattr(v, "id", getattr(v, "stem", v)))
def test_planted_bug_in_a_differently_written_script_trips_its_probes(script, bug, seed, reports):
    report = reports[script, bug.id, seed]
    details = "\n".join(f"{f.probe}: {f.status} {f.message}" for f in report.findings)
    assert set(bug.probes) <= failed_probes(report), details


@pytest.mark.parametrize(("ref", "bug", "seed"), CASES, ids=lambda v: getattr(v, "id", getattr(v, "stem", v)))
def test_planted_bug_runs_and_trips_exactly_its_probes(ref, bug, seed, reports):
    report = reports[ref, bug.id, seed]
    if ref.stem in bug.raises:  # the error is the symptom; the probes judge fixes that silence it
        assert report.verdict == "script-failed" and report.problem.startswith("the script raised RuntimeError"), report.problem
        return
    failed = failed_probes(report)
    assert report.verdict == verdict_for(report) and failed, f"{report.problem}\n{report.detail}"
    details = "\n".join(f"{f.probe}: {f.status} {f.message}" for f in report.findings)
    assert set(bug.probes) <= failed, details
    assert ("health" in failed) == breaks_training(bug.id, ref.stem), details
    assert failed <= {*bug.probes, *course_of(failed)}, details


def test_measured_difficulties_hold_for_a_fresh_run(reports):
    """katas/measured.json (bench/measure_difficulty.py) against this module's own runs of the same planted scripts:
    each bug on each reference at the file's seed, beside the correct run it keeps (test_references runs those)."""
    stored = measured()
    correct = {name: Measured.from_json(doc) for name, doc in stored["references"].items()}
    cases = [(ref, bug) for ref, bug, seed in CASES if seed == stored["seed"]]
    assert {(ref.stem, bug.id) for ref, bug in cases} == {(ref, bug) for bug, refs in stored["bugs"].items() for ref in refs}
    for ref, bug in cases:
        fresh = describe(Measured.of(reports[ref, bug.id, stored["seed"]]), correct[ref.stem], bug.difficulty)
        entry = stored["bugs"][bug.id][ref.stem]
        assert (fresh.difficulty, [s.value for s in fresh.shows]) == (entry["difficulty"], entry["shows"]), \
            (bug.id, ref.stem, fresh.lines, entry["lines"])
