"""The check report as people read it: disclosure levels, what it leads with, layout at 60, 80 and 120 columns in
a pipe and in a terminal, plots, plain output."""
from __future__ import annotations

import copy
import io
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT, check
from layout import ANSI, SCREEN, assert_fits, assert_laid_out, copied_kata, in_terminal
from layout import rendered as rendered_at

from checker.probes import PROBES
from checker.verdict import DIAGNOSIS, SYMPTOMS
from katas.cli import main
from katas.commands.check import disclosure, expectation
from katas.plots import sparkline
from katas.render import TidyConsole, show

BROKEN = sorted(FIXTURES.glob("*__broken*.py"))
# Katas as `kata check` judges them, one for each kind of evidence: a plotted series (03); words only, with the
# unpassed criteria of the health gate (19); a bug that shows as advice, with two plotted series (34).
KATAS = [ROOT / "broken" / f"{n}.py" for n in ("03", "19", "34")]
# Words that name a cause or a fix: a symptom-level report must not contain them.
CAUSES = [probe.id for probe in PROBES if probe.id not in ("health", "non-finite")] + [
    "dropout", "batch-norm", "batchnorm", "zero_grad", "detach", "eval mode", "train mode", "evaluation mode",
    "training mode", "evaluation behaviour", "per epoch", "once per epoch", "stepped", "before the step",
    "never freed", "left over", "accumulat", "seed", "clip_grad", "worker_init", "horizon"]


def kata(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def rendered(report, width: int, level: str, verbose: bool = False) -> str:
    report = copy.deepcopy(report)
    report.disclosure = level
    return rendered_at(report, width, verbose=verbose)


def test_symptoms_name_no_cause_in_text_or_json(checked):
    reports = checked(*BROKEN)
    failing = [r for r in reports if any(f.flagged for f in r.findings)]  # a symptom, or advice
    assert len(failing) == len(BROKEN)
    for report in failing:
        symptom_report = copy.deepcopy(report)
        symptom_report.disclosure = SYMPTOMS
        doc = symptom_report.to_json()
        assert all("probe" not in p and "message" not in p for p in doc["probes"])
        texts = {"every check": rendered(report, 80, SYMPTOMS, verbose=True).lower(),
                 "report": rendered(report, 80, SYMPTOMS).lower(),
                 "json": json.dumps(doc["probes"], ensure_ascii=False).lower()}
        for kind, text in texts.items():
            said = [word for word in CAUSES if word in text]
            assert not said, f"{report.script} ({kind}) names {said}"
        assert "--diagnose" in texts["report"]
        diagnosis = rendered(report, 80, DIAGNOSIS)
        assert any(f"{f.probe}" in diagnosis for f in report.findings if f.flagged)


def test_every_report_fits_its_width_and_leads_with_what_was_found(checked):
    """Each broken fixture's report, at the level a script of one's own gets, at 60, 80 and 120 columns."""
    for report in checked(*BROKEN):
        assert report.verdict == "fail" or any(f.flagged for f in report.findings), report.problem
        assert_laid_out(report, listing=report.script.endswith("graphs_retained__broken.py"))


@pytest.fixture(scope="module")
def katas():
    """Each of KATAS checked once, as `kata check` judges a kata: its report and its bug's status."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda path: check(path, expect=expectation(path)), KATAS))
    for path, report in zip(KATAS, reports):
        report.disclosure = disclosure(path, report, str(report.kata), diagnose=False)
    return reports


def test_a_kata_s_report_names_its_symptoms_and_its_bug_s_status_on_one_screen(katas):
    for report in katas:
        assert report.disclosure == SYMPTOMS and report.kata == "still present", report.problem
        assert_laid_out(report, injected=str(report.kata))


def test_a_plot_fits_between_the_values_its_ends_stand_for(checked):
    (report,) = checked(FIXTURES / "graphs_retained__broken.py")
    for width in (60, 80, 120):
        lines = assert_fits(rendered(report, width, SYMPTOMS), width)
        plot = [line for line in lines if re.fullmatch(r"\s+\d[\d.e+-]* [▁▂▃▄▅▆▇█]+ \d[\d.e+-]*", line)]
        assert len(plot) == 1, lines


def test_the_readme_shows_a_kata_s_report_as_it_is_at_80_columns_on_one_screen(katas):
    readme = (ROOT / "README.md").read_text()
    shown = next(block for block in readme.split("```")[1::2] if block.startswith("\nkata check broken/03.py"))
    out = io.StringIO()
    show(katas[0], TidyConsole(file=out, width=80, color_system=None), "kata check broken/03.py", str(katas[0].kata))
    lines = out.getvalue().splitlines()
    assert shown.strip("\n").splitlines()[1:] == lines[1:]  # all but the header's duration
    assert len(lines) <= SCREEN and lines[-2].startswith("✗ injected bug: still present")


@pytest.fixture(scope="module")
def in_terminals(tmp_path_factory):
    """Two real `kata check` runs, side by side, each in a pseudo-terminal of its own size: a clean reference in
    60 columns, in colour; a kata's failing check in 100 columns, with NO_COLOR."""
    failing = copied_kata("03", tmp_path_factory.mktemp("katas"))
    runs = [(["check", "reference/classifier.py"], 60, {}), (["check", str(failing)], 100, {"NO_COLOR": "1"})]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda run: in_terminal(run[0], run[1], env=run[2]), runs))


def test_in_a_terminal_a_clean_check_is_a_few_coloured_lines_of_its_width(in_terminals):
    code, written = in_terminals[0]
    assert code == 0 and "\x1b[" in written, written  # a terminal gets colour
    lines = assert_fits(ANSI.sub("", written), 60)
    assert len(lines) <= 4 and lines[-1].startswith("✓"), lines


def test_in_a_terminal_a_failing_kata_fills_its_width_without_colour_and_ends_on_its_verdict(in_terminals):
    code, written = in_terminals[1]
    assert code == 1 and "\x1b" not in written, written  # NO_COLOR: no escape code at all
    lines = assert_fits(written, 100)
    assert max(len(line) for line in lines) > 80  # laid out for the terminal's 100 columns, not a pipe's 80
    assert len(lines) <= SCREEN and "FAIL repeatable evaluation" in written
    assert lines[-2].startswith("✗ injected bug: still present · symptom: repeatable evaluation"), lines
    assert lines[-1].startswith("Edit the script, then run kata check"), lines


def test_sparklines_show_short_series_whole_and_long_ones_squeezed():
    assert sparkline([0, 16, 16]) == "▁██"
    assert len(sparkline(list(range(20)))) == 20
    assert len(sparkline(list(range(200)), width=48)) == 48
    assert sparkline([1, 1, 1], low=0, high=1) == "███" and sparkline([5, 5]) == "▁▁"
    assert sparkline([1.0, None, float("nan"), 2.0]) == "▁✗✗█"


def test_a_loss_mostly_nan_says_what_the_loss_falls_criterion_left_out(checked):
    (report,) = checked(FIXTURES / "non_finite__broken.py")
    health = next(f for f in report.findings if f.probe == "health")
    falls = next(p for p in health.parts if p.probe == "health.loss-falls")
    bad = sum(v is None for v in json.loads(json.dumps(report.findings[6].series))["loss per backward"])
    assert bad and f"{bad} of" in falls.message and "left out" in falls.message


def test_parameters_are_named_by_their_path_in_the_script_s_model(checked):
    (report,) = checked(FIXTURES / "gradient_flow__broken_part_called.py")
    flow = next(f for f in report.findings if f.probe == "gradient-flow")
    assert flow.failed and "model.body.0.weight" in flow.message and "Sequential" not in flow.message


def test_no_color_means_no_escape_codes_at_all_and_pipes_get_no_trailing_spaces():
    coloured = kata("bugs", env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert "\x1b[1m" in coloured.output  # a terminal gets bold
    plain = kata("bugs", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 0 and "\x1b[" not in plain.output
    piped = kata("bugs", env={"COLUMNS": None})
    assert [line for line in piped.output.splitlines() if line != line.rstrip()] == []
    assert 60 < max(len(line) for line in piped.output.splitlines()) <= 80  # a pipe gets 80 columns


def test_a_kata_reports_symptoms_until_diagnose_which_counts_like_a_hint(tmp_path):
    assert kata("new", "--bug", "eval-mode", "--seed", "1", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    script = tmp_path / "01.py"
    symptoms = kata("check", "--json", str(script))
    doc = json.loads(symptoms.stdout)
    assert symptoms.exit_code == 1 and doc["disclosure"] == SYMPTOMS
    seen = {p["check"]: p for p in doc["probes"]}
    assert seen["eval-repeatability"]["status"] == "fail" and "eval-mode" not in symptoms.stdout
    progress = tmp_path / ".kata" / "state.json"
    assert json.loads(progress.read_text())["katas"]["01"].get("diagnosed") in (None, False)

    meta = tmp_path / ".kata" / "01.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "engine": 1}))  # as if made by another engine version
    diagnosed = kata("check", "--diagnose", str(script), env={"COLUMNS": None})
    assert "made by kata engine 1" in diagnosed.stderr
    assert diagnosed.exit_code == 1
    assert 60 < max(len(line) for line in assert_fits(diagnosed.stdout, 80))  # a pipe gets 80 columns
    assert "eval-mode" in diagnosed.output and "dropout or batch-norm behaved as in training" in " ".join(
        diagnosed.output.split())
    assert json.loads(progress.read_text())["katas"]["01"]["diagnosed"] is True


def test_an_interview_task_reports_symptoms_and_grade_tells_whether_diagnose_was_used(tmp_path):
    task = tmp_path / "task"
    assert kata("interview", "--bugs", "1", "--seed", "5", "--ref", "binary", "--out", str(task)).exit_code == 0
    script = task / "candidate" / "train.py"
    plain = json.loads(kata("check", "--json", str(script)).stdout)
    assert plain["disclosure"] == SYMPTOMS and not any("probe" in p for p in plain["probes"])
    untouched = json.loads(kata("grade", "--json", str(task)).stdout)
    assert untouched["diagnosed"] == []

    assert json.loads(kata("check", "--json", "--diagnose", str(script)).stdout)["disclosure"] == DIAGNOSIS
    report = (task / "key" / "report.md").read_text()
    assert "`kata check --diagnose` (names the causes): not used" in report
    graded = kata("grade", str(task))
    assert "--diagnose: used 1 time," in graded.output
    assert "used 1 time," in (task / "key" / "report.md").read_text()
