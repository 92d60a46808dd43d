"""Interview tasks: observable bugs, behaviour-preserving disguise, diffs that point nowhere, grading."""
from __future__ import annotations

import csv
import difflib
import functools
import json
import os
import random
import re
import shutil
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REFERENCES, ROOT, WORKERS, check_all, failed_probes
from documented_json import validate

from checker.findings import NOT_APPLICABLE, PASS
from katas.bugs import BUGS
from katas.catalogue import difficulty
from katas.cli import main
from katas.engine.context import Context
from katas.engine.inject import sites
from katas.interview.grade import Since, Timing
from katas.interview.task import LEVELS, Task, TaskError, generate, plant

NAMES = tuple(sorted(p.stem for p in REFERENCES.glob("*.py")))
SOURCES = {name: (REFERENCES / f"{name}.py").read_text() for name in NAMES}


CHECKED = 8  # seeds whose 3-bug tasks and bug-free disguises run under the checker (2 × CHECKED checks)
GENERATED = 42  # seeds whose 3-bug tasks are generated and diffed (six per reference)
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
        present = [mean[level] for level in LEVELS if level in available(name)]  # a level no bug has draws the one
        assert present == sorted(set(present)), (name, mean)  # below it: each level present draws harder bugs


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
        drawn = [p.bug.id for (seed, _), task in tasks().items() if NAMES[seed % len(NAMES)] == name for p in task.planted]
        drawn += [p.bug.id for (ref, _, _), task in leveled().items() if ref == name for p in task.planted]
        # Drawn evenly, m draws from n bugs show n(1 - (1 - 1/n)^m) of them on average: 14.4 of text's 25 in its 21
        # draws (14 shown), 11.5 of binary's 13 in 27 (10 shown). A draw that favoured some bugs would show far fewer.
        n, m = len(applicable(name)), len(drawn)
        assert len(set(drawn)) >= 0.8 * n * (1 - (1 - 1 / n) ** m) and len(set(drawn)) >= n / 2, \
            (name, m, applicable(name) - set(drawn))


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


def test_a_bug_excluded_after_a_draw_whose_run_hid_it_is_not_drawn_again():
    first = tasks()[NAMES.index("classifier"), 3]  # a reference with bugs to spare
    hidden = first.planted[0].bug.id
    again = generate(first.reference, SOURCES[first.reference], 3, first.seed, exclude=frozenset({hidden}))
    assert hidden not in {p.bug.id for p in again.planted} and len(again.planted) == 3


# The tests below share one task made through the CLI (its script run once under the checker, for the brief);
# each works on a copy.
ISSUE = ["interview", "--seed", "5", "--bugs", "3", "--minutes", "30"]


@pytest.fixture(scope="module")
def issued(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("issued")
    result = CliRunner().invoke(main, [*ISSUE, "--out", str(root / "task"), "--key", str(root / "interviewer")])
    assert result.exit_code == 0, result.output
    return root


def copy_of(issued: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(task folder, key folder) of a fresh copy of the shared task."""
    shutil.copytree(issued, tmp_path / "copy")
    return tmp_path / "copy" / "task", tmp_path / "copy" / "interviewer"


def grade_json(*args: str):
    result = CliRunner().invoke(main, ["grade", "--json", *args])
    return result, json.loads(result.stdout)


def test_same_seed_same_task(issued, tmp_path):
    def files(folder):
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "issued.json"}

    result = CliRunner().invoke(main, [*ISSUE, "--out", str(tmp_path / "task"), "--key", str(tmp_path / "interviewer")])
    assert result.exit_code == 0, result.output
    assert files(tmp_path) == files(issued)


def test_task_layout_keeps_the_key_apart_and_the_brief_names_no_bug(issued):
    task, key = issued / "task", issued / "interviewer"
    assert sorted(p.name for p in task.rglob("*") if p.is_file()) == [".kata-task.json", "README.md", "train.py"]
    assert sorted(p.name for p in key.iterdir()) == ["issued.json", "key.json", "key.md", "solution.py"]
    doc = json.loads((key / "key.json").read_text())
    brief = (task / "candidate" / "README.md").read_text()
    assert "30 minutes" in brief and "kata check train.py" in brief
    for bug in doc["bugs"]:
        assert bug["id"] not in brief and bug["title"] not in brief
        assert bug["difficulty"] == difficulty(BUGS[bug["id"]], doc["reference"])  # as measured on the task's reference
    for words in ("Where:", "Why:", "Fix:", "Follow-up questions", "Scoring rubric", "```diff", "Maximum: 12 points"):
        assert words in (key / "key.md").read_text()


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def runs_of_six(text: str) -> set[tuple[str, ...]]:
    found = words(text)
    return {tuple(found[i:i + 6]) for i in range(len(found) - 5)}


def test_no_six_words_of_the_brief_are_in_the_catalogue(issued):
    """The brief cannot be searched for: no run of six words of it (case and punctuation aside) is on any
    `kata explain` page, in `kata bugs --json` or in docs/*.md."""
    runner = CliRunner()
    pages = [runner.invoke(main, ["explain", bug], env={"COLUMNS": "400"}).output for bug in BUGS]
    assert all("## What you observe" in page or "What you observe" in page for page in pages)
    listing = runner.invoke(main, ["bugs", "--json"]).output
    assert json.loads(listing)["bugs"]
    catalogue = set().union(*map(runs_of_six, [*pages, listing, *(p.read_text() for p in (ROOT / "docs").glob("*.md"))]))
    brief = (issued / "task" / "candidate" / "README.md").read_text()
    assert runs_of_six(brief) and not runs_of_six(brief) & catalogue, sorted(runs_of_six(brief) & catalogue)


def test_inside_a_task_folder_the_catalogue_does_not_answer(issued, monkeypatch):
    runner = CliRunner()
    refused = "does not answer inside an interview task"
    script = str(issued / "task" / "candidate" / "train.py")
    hint_from_elsewhere = runner.invoke(main, ["hint", script])
    assert hint_from_elsewhere.exit_code == 2 and refused in hint_from_elsewhere.output
    monkeypatch.chdir(issued / "task" / "candidate")
    for args in (["explain", "frozen"], ["bugs", "--json"], ["bugs"], ["hint", "train.py"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and refused in result.output and "Why" not in result.output, args


def test_hand_over_and_first_check_are_recorded_in_the_mark(issued, tmp_path):
    task, _ = copy_of(issued, tmp_path)
    folder = task / "candidate"
    mark = folder / ".kata-task.json"
    (folder / "train.py").write_text("def broken(:\n")  # a check that stops before running still counts as begun
    CliRunner().invoke(main, ["check", str(folder / "train.py")])
    first = json.loads(mark.read_text())["first_check"]
    assert first and json.loads(mark.read_text())["handed_over"] is None
    CliRunner().invoke(main, ["check", str(folder / "train.py")])
    assert json.loads(mark.read_text())["first_check"] == first

    assert CliRunner().invoke(main, ["interview", "--start", str(task), "--candidate", "Ada"]).exit_code == 0
    doc = json.loads(mark.read_text())
    assert doc["candidate"] == "Ada" and doc["handed_over"] >= first
    again = CliRunner().invoke(main, ["interview", "--start", str(folder)])
    assert again.exit_code == 2 and "--force" in again.output
    assert CliRunner().invoke(main, ["interview", "--start", str(tmp_path)]).exit_code == 2
    both = CliRunner().invoke(main, ["interview", "--start", str(task), "--out", str(tmp_path / "t")])
    assert both.exit_code == 2 and not (tmp_path / "t").exists()


def test_time_is_counted_in_whole_minutes_and_overtime_is_flagged():
    assert str(Timing(30, 1.2, Since.HANDED_OVER)) == "1 minute of 30 (from the hand-over to the last change)"
    over = Timing(45, 182, Since.ISSUED)
    assert over.over == 137 and "182 minutes of 45, OVER the limit by 137 minutes" in str(over)
    assert Timing(45, 45, Since.FIRST_CHECK).over is None
    assert str(Timing(45, unknown="the script was not edited")).startswith("unknown, the script was not edited")


def test_existing_task_is_not_overwritten_without_force(issued, tmp_path):
    task, _ = copy_of(issued, tmp_path)
    script = task / "candidate" / "train.py"
    script.write_text(script.read_text() + "# candidate's work\n")
    refused = CliRunner().invoke(main, ["interview", "--seed", "2", "--out", str(task)])
    assert refused.exit_code == 2 and "--force" in refused.output
    assert script.read_text().endswith("# candidate's work\n")


def test_too_many_bugs_for_a_difficulty_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["interview", "--bugs", "6", "--difficulty", "easy", "--ref", "binary",
                                       "--out", str(tmp_path / "t")])
    assert result.exit_code == 2 and "compatible bugs apply to binary at difficulty easy" in result.output


def test_grade_after_the_key_finds_every_bug_fixed_and_scores_the_fixes(issued, tmp_path):
    task, key = copy_of(issued, tmp_path)
    (task / "candidate" / "train.py").write_text((key / "solution.py").read_text())
    fixed = CliRunner().invoke(main, ["grade", str(task), "--key", str(key), "--name", "Ada", "--report",
                                      str(tmp_path / "ada.md")])
    assert fixed.exit_code == 0, fixed.output
    assert "3 of 3 fixed" in fixed.output and "health gate: pass" in fixed.output and "score 6 of 12" in fixed.output
    report = (tmp_path / "ada.md").read_text()
    assert report.startswith("# Interview grading report: Ada")
    assert "**3 of 3 bugs fixed**" in report and "- none" in report and "**Score: 6 of 12**" in report


def test_grade_names_a_new_symptom_the_candidate_introduced_and_takes_a_point(tmp_path):
    """On the classifier, whose seed-5 task plants no zero-grad: a candidate who removes the zeroing adds a symptom."""
    task, key = tmp_path / "task", tmp_path / "interviewer"
    result = CliRunner().invoke(main, [*ISSUE, "--ref", "classifier", "--out", str(task), "--key", str(key)])
    assert result.exit_code == 0, result.output
    solution = (key / "solution.py").read_text()
    broken_elsewhere = solution.replace(".zero_grad(set_to_none=True)", ".zero_grad(set_to_none=True) if False else None")
    assert broken_elsewhere != solution
    (task / "candidate" / "train.py").write_text(broken_elsewhere)
    _, doc = grade_json(str(task), "--key", str(key))
    assert [s["probe"] for s in doc["new_symptoms"]] == ["grads-accumulate"]
    assert doc["exit_code"] == 1
    fix_points = 2 * doc["fixed"] if doc["score"]["trains"] else 0
    assert doc["score"]["points"] == fix_points - 1 and doc["score"]["maximum"] == 12


def test_grading_a_script_that_cannot_run_still_writes_the_report_and_the_json(issued, tmp_path):
    task, key = copy_of(issued, tmp_path)
    (task / "candidate" / "train.py").write_text("def broken(:\n")
    result, doc = grade_json(str(task), "--key", str(key))
    validate(doc, "grade")
    assert result.exit_code == doc["exit_code"] == 3
    assert {b["status"] for b in doc["bugs"]} == {"not checked"} and "syntax error" in doc["check"]["problem"]
    assert doc["score"]["points"] == 0
    report = (key / "report.md").read_text()
    assert "**The script did not run:**" in report and "syntax error" in report
    text = CliRunner().invoke(main, ["grade", str(task), "--key", str(key)]).output
    assert "not edited of" not in text and "time:" in text


def test_grade_json_prints_a_document_even_without_a_key(tmp_path):
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "train.py").write_text("print(1)\n")
    result = CliRunner().invoke(main, ["grade", "--json", str(tmp_path)])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    validate(doc, "grade error")
    assert doc["exit_code"] == 2 and "no answer key" in doc["error"]


def fix_by_hand(script: str, solution: str, bug: dict) -> str:
    """``script`` with the lines the key places ``bug`` at replaced as the solution has them, nothing else."""
    lines = {int(n) - 1 for n in re.findall(r"\d+", bug["where"])}
    before, after = script.splitlines(), solution.splitlines()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        ours = op != "equal" and any(i1 <= n < i2 for n in lines)
        out += after[j1:j2] if ours else before[i1:i2]
    return "\n".join(out) + "\n"


def table_rows(markdown: str) -> list[dict]:
    """The rows of the first table in ``markdown``, by column."""
    text = markdown.splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("| "))
    lines = [line for line in text[start:][:next((i for i, line in enumerate(text[start:]) if not line.startswith("|")),
                                              None)] if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]


def test_three_candidates_of_one_task_are_graded_into_one_table_with_scores(issued, tmp_path):
    task, key = copy_of(issued, tmp_path)
    doc_key = json.loads((key / "key.json").read_text())
    candidate = task / "candidate"
    ada, bob, cy = (shutil.copytree(candidate, tmp_path / name) for name in ("ada", "bob", "cy"))
    # Bob: handed over, then one bug fixed by hand a minute later
    assert CliRunner().invoke(main, ["interview", "--start", str(bob), "--candidate", "Bob"]).exit_code == 0
    handed = datetime.fromisoformat(json.loads((bob / ".kata-task.json").read_text())["handed_over"])
    target = next(b for b in doc_key["bugs"] if b["where"].startswith("line"))
    (bob / "train.py").write_text(fix_by_hand((bob / "train.py").read_text(), (key / "solution.py").read_text(), target))
    os.utime(bob / "train.py", (handed.timestamp() + 70, handed.timestamp() + 70))
    # Cy: handed over three hours ago, and the script now raises
    mark = json.loads((cy / ".kata-task.json").read_text())
    mark["handed_over"] = (datetime.now(timezone.utc) - timedelta(hours=3)).isoformat(timespec="seconds")
    (cy / ".kata-task.json").write_text(json.dumps(mark))
    (cy / "train.py").write_text('raise RuntimeError("half-finished edit")\n' + (cy / "train.py").read_text())

    result = CliRunner().invoke(main, ["grade", "--json", str(task), str(ada), str(bob), str(cy), "--key", str(key),
                                       "--jobs", "2"])
    doc = json.loads(result.stdout)
    validate(doc, "grades")
    grades = {g["candidate"]: g for g in doc["grades"]}
    assert list(grades) == ["ada", "Bob", "cy"] and result.exit_code == 3  # the worst: a script that did not run

    table = {row["candidate"]: row for row in table_rows((key / "grades.md").read_text())}
    with open(key / "grades.csv", newline="") as f:
        rows = {row["candidate"]: row for row in csv.DictReader(f)}
    assert list(table) == list(rows) == ["ada", "Bob", "cy"]
    for name, g in grades.items():
        row, cells = rows[name], table[name]
        fix_points = 2 * int(row["fixed"]) if row["trains"] == "yes" else 0
        assert int(row["points"]) == fix_points - int(row["new_symptoms"]) == g["score"]["points"], name
        assert int(row["maximum"]) == 12 and cells["score"] == f"{row['points']} of 12"
        assert cells["fixed"] == f"{row['fixed']} of 3" and int(row["fixed"]) == g["fixed"]
        for bug in doc_key["bugs"]:
            status = next(b["status"] for b in g["bugs"] if b["id"] == bug["id"])
            assert row[bug["id"]] == cells[f"{bug['id']} ({bug['difficulty']})"] == status

    assert {rows["ada"][b["id"]] for b in doc_key["bugs"]} == {"still present"} and rows["ada"]["points"] == "0"
    assert table["ada"]["time"] == "unknown" and rows["ada"]["since"] == ""
    assert rows["Bob"][target["id"]] == "fixed"
    assert {rows["Bob"][b["id"]] for b in doc_key["bugs"] if b is not target} == {"still present"}
    assert int(rows["Bob"]["points"]) == 2 and table["Bob"]["time"] == "1 minute of 30"
    assert rows["Bob"]["since"] == "handed_over"
    assert table["cy"]["outcome"].startswith("did not run") and "half-finished edit" in table["cy"]["outcome"]
    assert {rows["cy"][b["id"]] for b in doc_key["bugs"]} == {"not checked"} and rows["cy"]["points"] == "0"
    assert "OVER by" in table["cy"]["time"] and float(rows["cy"]["over_by"]) > 140

    # The brief said what the untouched script's run shows: each flagged check, in its words or its figures.
    brief = (candidate / "README.md").read_text().lower()
    flagged = [p for p in grades["ada"]["check"]["probes"] if p["status"] in ("fail", "error", "advice")]
    assert flagged
    for probe in flagged:
        assert probe["observed"].lower() in brief or probe["measured"].lower() in brief, probe["probe"]


def test_six_submissions_handed_in_to_one_folder_are_graded_on_two_cores_and_a_hanging_one_costs_only_its_row(
        issued, tmp_path):
    task, key = copy_of(issued, tmp_path)
    doc_key = json.loads((key / "key.json").read_text())
    handed_in = tmp_path / "handed-in"
    for name in ("ada", "bob", "cy", "dan", "fay"):
        shutil.copytree(task / "candidate", handed_in / name)
    shutil.copy(task / "candidate" / "train.py", handed_in / "eve.py")  # a loose file is a submission too
    target = next(b for b in doc_key["bugs"] if b["where"].startswith("line"))
    (handed_in / "bob" / "train.py").write_text(
        fix_by_hand((handed_in / "bob" / "train.py").read_text(), (key / "solution.py").read_text(), target))
    (handed_in / "cy" / "train.py").write_text('raise RuntimeError("half-finished edit")\n')
    (handed_in / "dan" / "train.py").write_text("import time\ntime.sleep(600)\n")  # hangs before training
    (handed_in / "notes").mkdir()  # a folder without the task's script is not a submission

    result = CliRunner().invoke(main, ["grade", "--json", str(task), "--submissions", str(handed_in), "--key",
                                       str(key), "--jobs", "2", "--idle", "10", "--timeout", "120"])
    doc = json.loads(result.stdout)
    validate(doc, "grades")
    assert result.exit_code == 4  # the worst of the six: a script stopped for making no progress
    with open(key / "grades.csv", newline="") as f:
        rows = {row["candidate"]: row for row in csv.DictReader(f)}
    table = {row["candidate"]: row for row in table_rows((key / "grades.md").read_text())}
    assert list(rows) == list(table) == ["ada", "bob", "cy", "dan", "eve", "fay"]
    for untouched in ("ada", "eve", "fay"):
        assert {rows[untouched][b["id"]] for b in doc_key["bugs"]} == {"still present"}, untouched
    assert rows["bob"][target["id"]] == "fixed" and rows["bob"]["points"] == "2"
    assert "half-finished edit" in rows["cy"]["outcome"]
    assert rows["dan"]["exit_code"] == "4" and "progress" in rows["dan"]["outcome"]


def test_a_task_as_a_gradescope_autograder_scores_the_untouched_script_zero_and_never_names_a_bug(issued, tmp_path):
    import zipfile

    from test_autograder import autograde

    task, key = copy_of(issued, tmp_path)
    doc_key = json.loads((key / "key.json").read_text())
    built = CliRunner().invoke(main, ["autograder", str(task), "--key", str(key), "--out", str(tmp_path / "bundle"),
                                      "--timeout", "120"])
    assert built.exit_code == 0, built.output
    assert f"total points to {2 * len(doc_key['bugs'])}" in built.output
    layout = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "bundle" / "autograder.zip") as archive:
        archive.extractall(layout / "source")
    results = autograde(layout, {"train.py": (task / "candidate" / "train.py").read_text()})  # validated as read
    assert results["score"] == 0
    planted = [t for t in results["tests"] if t["name"].startswith("Symptom ")]
    assert len(planted) == len(doc_key["bugs"]) and {t["output"] for t in planted} == {"still present"}
    text = json.dumps(results).lower()
    for bug in doc_key["bugs"]:
        assert bug["id"] not in text and bug["title"].lower() not in text


def test_a_submissions_folder_without_any_submission_is_a_clear_error(issued, tmp_path):
    task, key = copy_of(issued, tmp_path)
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["grade", str(task), "--submissions", str(tmp_path / "empty"), "--key", str(key)])
    assert result.exit_code == 2 and "no submissions in" in result.output


def test_the_brief_says_each_flagged_check_in_its_words_unless_the_catalogue_holds_them_and_hides_the_folder():
    from types import SimpleNamespace

    from checker.findings import ADVICE, FAIL, Finding
    from katas.interview.symptoms import Catalogue, describe

    findings = [Finding("eval-mode", "", FAIL, "16 of 16 forwards", "0", observed="two evaluations of the same weights disagree"),
                Finding("pad-invariance", "", FAIL, "0.67", "≤ 1e-05", observed="outputs depend on how much padding follows it"),
                Finding("padding-waste", "", ADVICE, "40 %", "", observed="40 % of the positions were padding"),
                Finding("weights-update", "", PASS, "24 updates", "")]
    output = "/somewhere/kata-new-x/train.py:3: UserWarning: careful\nepoch 0  loss 1.2\n"
    catalogue = Catalogue.of(["a sample's outputs do not depend on how much padding follows it."])
    observed = describe(SimpleNamespace(findings=findings, output=output), catalogue, "train.py")
    assert observed.symptoms == ["Two evaluations of the same weights disagree.",
                                 "Pad sensitivity: measured 0.67, expected ≤ 1e-05.",
                                 "40 % of the positions were padding."]
    assert observed.output == ["train.py:3: UserWarning: careful", "epoch 0  loss 1.2"]
