"""The check report as people read it: disclosure levels, layout at 60, 80 and 120 columns, plots, plain output."""
from __future__ import annotations

import copy
import io
import json
import re

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from checker.probes import PROBES
from checker.verdict import DIAGNOSIS, SYMPTOMS
from katas.cli import main
from katas.plots import sparkline
from katas.render import TidyConsole, show

BROKEN = sorted(FIXTURES.glob("*__broken*.py"))
# Words that name a cause or a fix: a symptom-level report must not contain them.
CAUSES = [probe.id for probe in PROBES if probe.id not in ("health", "non-finite")] + [
    "dropout", "batch-norm", "batchnorm", "zero_grad", "detach", "eval mode", "train mode", "evaluation mode",
    "training mode", "evaluation behaviour", "per epoch", "once per epoch", "stepped", "before the step",
    "never freed", "left over", "accumulat", "seed", "clip_grad", "worker_init", "horizon"]


def kata(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def rendered(report, width: int, level: str, verbose: bool = False) -> str:
    report = copy.deepcopy(report)
    report.script, report.disclosure = "train.py", level
    out = io.StringIO()
    show(report, TidyConsole(file=out, width=width, color_system=None), "kata check train.py", verbose=verbose)
    return out.getvalue()


def test_symptoms_name_no_cause_in_text_or_json(checked):
    reports = checked(*BROKEN)
    failing = [r for r in reports if any(f.flagged for f in r.findings)]  # a symptom, or advice
    assert len(failing) == len(BROKEN)
    for report in failing:
        symptom_report = copy.deepcopy(report)
        symptom_report.disclosure = SYMPTOMS
        doc = symptom_report.to_json()
        assert all("probe" not in p and "message" not in p for p in doc["probes"])
        texts = {"text": rendered(report, 80, SYMPTOMS, verbose=True).lower(),
                 "json": json.dumps(doc["probes"], ensure_ascii=False).lower()}
        for kind, text in texts.items():
            said = [word for word in CAUSES if word in text]
            assert not said, f"{report.script} ({kind}) names {said}"
        assert "--diagnose" in texts["text"]
        diagnosis = rendered(report, 80, DIAGNOSIS)
        assert any(f"{f.probe}" in diagnosis for f in report.findings if f.flagged)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_report_fits_the_terminal_it_gets(checked, width):
    (report,) = checked(FIXTURES / "graphs_retained__broken.py")
    failing = next(f for f in report.findings if f.failed)
    for level in (SYMPTOMS, DIAGNOSIS):
        text = rendered(report, width, level)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width
        assert not [line for line in lines if line != line.rstrip()]  # nothing trails
        assert "…" not in text  # nothing is cut short
        flowing = " ".join(text.split())
        assert " ".join((failing.symptom if level == SYMPTOMS else failing.message).split()) in flowing
        assert ("what was observed" in text) == (width >= 110)  # a table when wide, stacked rows when not
        plot = [line for line in lines if re.fullmatch(r"\s+\d[\d.e+-]* [▁▂▃▄▅▆▇█]+ \d[\d.e+-]*", line)]
        assert len(plot) == 1, text  # the plot, between the values its ends stand for


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
    piped = kata("bugs")
    assert [line for line in piped.output.splitlines() if line != line.rstrip()] == []


def test_a_kata_reports_symptoms_until_diagnose_which_counts_like_a_hint(tmp_path):
    assert kata("new", "--bug", "eval-mode", "--seed", "1", "--no-verify", "--dir", str(tmp_path)).exit_code == 0
    script = tmp_path / "01.py"
    symptoms = kata("check", "--json", str(script))
    doc = json.loads(symptoms.stdout)
    assert symptoms.exit_code == 1 and doc["disclosure"] == SYMPTOMS
    seen = {p["symptom"]: p for p in doc["probes"]}
    assert seen["eval-repeatability"]["status"] == "fail" and "eval-mode" not in symptoms.stdout
    progress = tmp_path / ".kata" / "state.json"
    assert json.loads(progress.read_text())["katas"]["01"].get("diagnosed") in (None, False)

    meta = tmp_path / ".kata" / "01.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "engine": 1}))  # as if made by another engine version
    diagnosed = kata("check", "--diagnose", str(script))
    assert "made by kata engine 1" in diagnosed.stderr
    assert diagnosed.exit_code == 1
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
    assert "--diagnose: used 1 times" in graded.output
    assert "used 1 times" in (task / "key" / "report.md").read_text()
