"""Interview tasks: observable bugs, behaviour-preserving disguise, diffs that point nowhere, grading."""
from __future__ import annotations

import difflib
import functools
import json
import random
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
from click.testing import CliRunner
from conftest import REFERENCES, WORKERS, check_all, failed_probes

from checker.findings import NOT_APPLICABLE, PASS
from katas.bugs import BUGS
from katas.catalogue import difficulty
from katas.cli import main
from katas.engine.context import Context
from katas.engine.inject import sites
from katas.interview.task import LEVELS, Task, TaskError, generate, plant

NAMES = tuple(sorted(p.stem for p in REFERENCES.glob("*.py")))
SOURCES = {name: (REFERENCES / f"{name}.py").read_text() for name in NAMES}


CHECKED = 8  # seeds whose 3-bug tasks and bug-free disguises run under the checker (2 × CHECKED checks)
GENERATED = 24  # seeds whose 3-bug tasks are generated and diffed
SMALL = 4  # seeds whose 1- and 2-bug tasks are generated and counted


def task_for(seed: int, n_bugs: int):
    reference = NAMES[seed % len(NAMES)]
    return generate(reference, SOURCES[reference], n_bugs, seed)


@functools.cache
def tasks() -> dict:
    """Tasks for GENERATED seeds x 3 bugs and SMALL seeds x 1, 2 bugs, generated once, in parallel."""
    cases = sorted({(seed, 3) for seed in range(GENERATED)} | {(seed, n) for seed in range(SMALL) for n in (1, 2)})
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(cases, pool.map(task_for, *zip(*cases))))


@pytest.fixture(scope="module")
def checked_tasks(tmp_path_factory):
    """CHECKED seeds' 3-bug tasks, and each seed's bug-free disguise, checked side by side.

    Tasks of one or two bugs plant a subset of what three-bug tasks do (the kill matrix in
    test_injected_bugs checks every bug alone), so they are generated and counted, not run."""
    folder = tmp_path_factory.mktemp("tasks")
    scripts = {}
    for seed in range(CHECKED):
        task = tasks()[seed, 3]
        for kind, text in (("task", task.script), ("clean", task.solution)):
            path = folder / f"{kind}-{abs(hash(text))}.py"
            path.write_text(text)
            scripts[seed, kind] = path
    reports = check_all(sorted(set(scripts.values())))
    return tasks(), {case: reports[path] for case, path in scripts.items()}


def largest_task(name: str, level: str, seed: int) -> Task:
    """A task of as many bugs at ``level`` as apply together, up to 3 (on the data-parallel reference, the two bugs
    measured easy there hide each other: one)."""
    for n_bugs in (3, 2):
        try:
            return generate(name, SOURCES[name], n_bugs, seed, level)
        except TaskError:
            pass
    return generate(name, SOURCES[name], 1, seed, level)


@functools.cache
def leveled() -> dict:
    """A task of up to 3 bugs at each difficulty, on each reference, generated once, in parallel."""
    cases = [(name, level, 0) for name in NAMES for level in LEVELS]
    with ProcessPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip(cases, pool.map(largest_task, *zip(*cases))))


def test_difficulty_draws_its_own_level_first_and_nothing_harder():
    for (name, level, seed), task in leveled().items():
        levels = [LEVELS.index(difficulty(p.bug, name)) for p in task.planted]
        assert max(levels) <= LEVELS.index(level), (name, level, seed)
        assert level not in available(name) or LEVELS.index(level) in levels, (name, level, seed)
    for name in NAMES:
        mean = {level: sum(LEVELS.index(difficulty(p.bug, name)) for (n, lv, _), t in leveled().items()
                           if n == name and lv == level for p in t.planted) for level in LEVELS}
        assert mean["easy"] < mean["medium"] < mean["hard"], (name, mean)


@functools.cache
def applicable(name: str) -> frozenset[str]:
    ctx = Context.of(SOURCES[name])
    return frozenset(b.id for b in BUGS.values() if sites(b, ctx))


def available(name: str) -> set[str]:
    return {difficulty(BUGS[bug], name) for bug in applicable(name)}


def test_tasks_draw_from_the_whole_catalogue():
    """Every bug that applies to a reference can be planted into its disguised task, and the generated tasks
    (plain, and of each difficulty) between them show most of the catalogue."""
    for name in NAMES:
        seed = NAMES.index(name)
        solution = tasks()[seed, 3].solution
        ctx = Context.of(solution)
        for bug in sorted(applicable(name)):
            assert plant(Task(name, seed, None, "", solution, solution), BUGS[bug], random.Random(0), ctx), bug
        planted = {p.bug.id for (seed, _), task in tasks().items() if NAMES[seed % len(NAMES)] == name for p in task.planted}
        planted |= {p.bug.id for (ref, _, _), task in leveled().items() if ref == name for p in task.planted}
        # 6 plain tasks and 3 levelled ones per reference draw up to 27 bugs: 67 to 92 % of each reference's bugs (the
        # fewest on text, the reference with the most bugs, whose levelled tasks draw by the difficulties measured there)
        assert len(planted) >= 0.65 * len(applicable(name)), (name, applicable(name) - planted)


def test_every_task_plants_as_many_distinct_bugs_as_asked():
    for (seed, n), task in tasks().items():
        assert len(task.planted) == n == len({p.bug.id for p in task.planted}), (seed, n)


def test_every_planted_bug_is_flagged(checked_tasks):
    tasks, reports = checked_tasks
    for seed in range(CHECKED):
        task, report = tasks[seed, 3], reports[seed, "task"]
        expected = {probe for p in task.planted for probe in p.bug.probes}
        assert expected <= failed_probes(report), (seed, [p.bug.id for p in task.planted], report.problem,
                                                   [(f.probe, f.status, f.message) for f in report.findings])


def test_the_disguised_script_without_bugs_passes_every_probe(checked_tasks):
    tasks, reports = checked_tasks
    for seed in range(CHECKED):
        report = reports[seed, "clean"]
        assert report.verdict == "pass", (seed, report.problem, report.detail)
        assert all(f.status in (PASS, NOT_APPLICABLE) for f in report.findings)


def test_a_diff_against_the_reference_does_not_point_at_the_bugs():
    scripts = set()
    for seed in range(GENERATED):
        task = tasks()[seed, 3]
        scripts.add(task.script)
        reference = SOURCES[task.reference].splitlines()
        diff = [line for line in difflib.unified_diff(reference, task.script.splitlines(), n=0, lineterm="")
                if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        bug_lines = sum(len(p.lines) + len(p.removed_at) for p in task.planted)
        assert bug_lines / len(diff) < 0.2, (seed, bug_lines, len(diff))
    assert len(scripts) >= GENERATED - 3


def test_same_seed_same_task_and_different_seeds_differ(tmp_path):
    def files(folder):
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "issued.json"}

    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        result = CliRunner().invoke(main, ["interview", "--seed", str(seed), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    assert files(tmp_path / "a") == files(tmp_path / "b")
    assert files(tmp_path / "a") != files(tmp_path / "c")


def test_task_layout_keeps_the_key_apart_and_the_brief_names_symptoms_not_causes(tmp_path):
    key = tmp_path / "interviewer"
    result = CliRunner().invoke(main, ["interview", "--seed", "3", "--bugs", "2", "--minutes", "30",
                                       "--out", str(tmp_path / "task"), "--key", str(key)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "task").rglob("*") if p.is_file()) == [".kata-task.json", "README.md", "train.py"]
    assert sorted(p.name for p in key.iterdir()) == ["issued.json", "key.json", "key.md", "solution.py"]
    doc = json.loads((key / "key.json").read_text())
    brief = (tmp_path / "task" / "candidate" / "README.md").read_text()
    assert "30 minutes" in brief and "kata check train.py" in brief
    for bug in doc["bugs"]:
        assert bug["id"] not in brief and bug["title"] not in brief
    for words in ("Where:", "Why:", "Fix:", "Follow-up questions", "Scoring rubric", "```diff"):
        assert words in (key / "key.md").read_text()


def test_existing_task_is_not_overwritten_without_force(tmp_path):
    out = tmp_path / "task"
    assert CliRunner().invoke(main, ["interview", "--seed", "1", "--out", str(out)]).exit_code == 0
    script = out / "candidate" / "train.py"
    script.write_text(script.read_text() + "# candidate's work\n")
    refused = CliRunner().invoke(main, ["interview", "--seed", "2", "--out", str(out)])
    assert refused.exit_code == 2 and "--force" in refused.output
    assert script.read_text().endswith("# candidate's work\n")


def test_too_many_bugs_for_a_difficulty_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["interview", "--bugs", "6", "--difficulty", "easy", "--ref", "binary",
                                       "--out", str(tmp_path / "t")])
    assert result.exit_code == 2 and "compatible bugs apply to binary at difficulty easy" in result.output


def test_grade_reports_none_fixed_on_the_untouched_task_and_all_fixed_after_the_key(tmp_path):
    out = tmp_path / "task"
    assert CliRunner().invoke(main, ["interview", "--seed", "5", "--bugs", "3", "--out", str(out)]).exit_code == 0
    untouched = CliRunner().invoke(main, ["grade", "--json", str(out)])
    doc = json.loads(untouched.output)
    assert untouched.exit_code == 1 and doc["fixed"] == 0
    assert {b["status"] for b in doc["bugs"]} == {"still present"} and doc["minutes_taken"] is None

    script = out / "candidate" / "train.py"
    time.sleep(1.1)
    script.write_text((out / "key" / "solution.py").read_text())
    fixed = CliRunner().invoke(main, ["grade", str(out), "--report", str(tmp_path / "ada.md")])
    assert fixed.exit_code == 0, fixed.output
    assert "3 of 3 fixed" in fixed.output and "health gate: pass" in fixed.output
    report = (tmp_path / "ada.md").read_text()
    assert "**3 of 3 bugs fixed**" in report and "- none" in report


def test_grade_names_a_new_symptom_the_candidate_introduced(tmp_path):
    out = tmp_path / "task"
    assert CliRunner().invoke(main, ["interview", "--seed", "8", "--bugs", "1", "--ref", "classifier",
                                     "--out", str(out)]).exit_code == 0
    solution = (out / "key" / "solution.py").read_text()
    broken_elsewhere = solution.replace(".zero_grad(set_to_none=True)", ".zero_grad(set_to_none=True) if False else None")
    assert broken_elsewhere != solution
    (out / "candidate" / "train.py").write_text(broken_elsewhere)
    doc = json.loads(CliRunner().invoke(main, ["grade", "--json", str(out)]).output)
    assert [s["probe"] for s in doc["new_symptoms"]] == ["grads-accumulate"]
    assert doc["exit_code"] == 1


def test_grading_a_script_that_cannot_run_still_writes_the_report_and_the_json(tmp_path):
    task = tmp_path / "task"
    assert CliRunner().invoke(main, ["interview", "--seed", "4", "--bugs", "2", "--out", str(task)]).exit_code == 0
    (task / "candidate" / "train.py").write_text("def broken(:\n")
    result = CliRunner().invoke(main, ["grade", "--json", str(task)])
    doc = json.loads(result.stdout)
    assert result.exit_code == doc["exit_code"] == 3
    assert {b["status"] for b in doc["bugs"]} == {"not checked"} and "syntax error" in doc["check"]["problem"]
    report = (task / "key" / "report.md").read_text()
    assert "**The script did not run:**" in report and "syntax error" in report
    text = CliRunner().invoke(main, ["grade", str(task)]).output
    assert "not edited of" not in text and "time:" in text


def test_grade_json_prints_a_document_even_without_a_key(tmp_path):
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "train.py").write_text("print(1)\n")
    result = CliRunner().invoke(main, ["grade", "--json", str(tmp_path)])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2 and "no answer key" in doc["error"]
