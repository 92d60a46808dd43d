"""reported-metric: what printed text is read as an accuracy, and the judge on hand-made observations (no runs)."""
from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import reported_metric
from checker.probes.reported_metric import readings


def read(text: str) -> list[tuple[str, bool]]:
    return [(r["text"], r["best"]) for r in readings(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("epoch 0  train 0.1234  val 0.5678  acc 0.960  lr 1.00e-02", [("0.960", False)]),
    ("test  | Loss: 0.300 | Acc: 95.312% (122/128)", [("95.312%", False), ("(122/128)", False)]),
    ("Test set: Average loss: 0.0331, Accuracy: 475/500 (95%)", [("475/500", False), ("(95%)", False)]),
    ("{'val_acc': 0.95, 'loss': 0.1}", [("0.95", False)]),
    ("acc tensor(0.9600)", [("tensor(0.9600)", False)]),
    ("valAccuracy=0.9 Acc@1 90.1 top1_acc 0.9", [("0.9", False), ("90.1", False), ("0.9", False)]),
    ("best val acc: 0.97 max_acc 0.98", [("0.97", True), ("0.98", True)]),
    # other statistics, and words that only contain "acc"
    ("top5_acc 0.99 acc@5 0.99 top-5 acc 0.99 acc5 0.99", []),
    ("balanced accuracy 0.9 macro_acc 0.9 per-class acc 0.9 train acc 0.9 Train Acc 0.9", []),
    ("acc_steps 4 grad_acc 4 accumulate 4 accelerator 1", []),
    ("Accuracy of the network on the 10000 test images: 96 %", [("96 %", False)]),
    ("Accuracy for class: plane is 45.2 %", []),
    ("accuracy went up | loss: 0.3", []),
    ("Accuracy (train): 0.9", []),
    ("epoch 3 loss 0.1 f1 0.93 acc 0.95", [("0.95", False)]),
])
def test_what_is_read_as_an_accuracy(text, expected):
    assert read(text) == expected


def test_a_reading_stands_for_a_fraction_or_a_percentage_within_its_printed_precision():
    bare, = readings("acc 96.0")
    assert bare["values"] == [[96.0, 0.05], [0.96, 0.0005]]
    percent, = readings("acc 97.25%")
    assert percent["values"] == [[0.9725, 5e-05]]
    count, = readings("Accuracy: 475/500")
    assert count["values"] == [[0.95, reported_metric.FLOOR]]
    full, = readings("val_accuracy: 0.9599999785423279")  # a float32 mean printed in full
    assert full["values"][0][1] == reported_metric.FLOOR
    assert readings("acc 0.95/0.97")[0]["values"][0][0] == 0.95  # two figures side by side, not a count


def test_a_reading_after_a_phrase_may_be_one_class_accuracy_and_only_such_a_reading():
    """The tutorial's per-class lines (``Accuracy of plane : 45 %``) report a class's accuracy; a plain ``acc`` never
    does, so a wrong overall accuracy that happens to equal a class's still fails."""
    per_class = {"what": "evaluation, class 3", "accuracy": 0.45, "correct": 45, "total": 100, "per_class": True}
    overall = candidate(0.96, 480, 500)
    assert judge(report("Accuracy of plane : 45 %", [overall, per_class])).status == PASS
    assert judge(report("Accuracy of plane : 46 %", [overall, per_class])).status == FAIL
    assert judge(report("acc 0.45", [overall, per_class])).status == FAIL


def test_a_whole_number_also_stands_for_a_truncated_percentage():
    """``100 * correct // total`` prints 96 for 96.9 %: a whole number matches from half a unit below it to one
    unit above."""
    truncated, = readings("Accuracy of the network on the test images: 96 %")
    (centre, tolerance), = truncated["values"]
    assert centre - tolerance == pytest.approx(0.955) and centre + tolerance == pytest.approx(0.97)
    assert judge(report("Accuracy of the network on the test images: 96 %",
                        [candidate(0.968, 484, 500)])).status == PASS
    assert judge(report("Accuracy of the network on the test images: 96 %",
                        [candidate(0.972, 486, 500)])).status == FAIL


def candidate(accuracy, correct=None, total=None, what="evaluation"):
    return {"what": what, "accuracy": accuracy, "correct": correct, "total": total}


def report(text, candidates=None, clean=True, earlier=()):
    return {"text": text, "readings": readings(text), "candidates": candidates or [candidate(0.96, 480, 500)],
            "clean": clean, "earlier": list(earlier)}


def judge(*reports, evaluations=16, prints=4, untied=0):
    observation = reported_metric.Observation(list(reports), evaluations, untied, 0, prints)
    return reported_metric.judge(observation, RunFacts())


def test_a_printed_accuracy_far_from_the_recomputed_one_fails_and_the_symptom_names_no_cause():
    finding = judge(report("epoch 0  val 0.39  acc 120.000"), report("epoch 1  val 0.31  acc 121.500"))
    assert finding.status == FAIL and finding.measured == "2 of 2 printed accuracies"
    assert "acc 120.000" in finding.observed and "0.960 (480 of 500 samples)" in finding.observed
    assert "denominator" in finding.message
    for word in ("denominator", "batch", "len(", "divid"):
        assert word not in finding.observed


def test_a_count_of_padded_batches_is_told_from_the_samples():
    assert judge(report("acc 0.938")).status == FAIL  # 480 / 512 printed for 480 / 500
    assert judge(report("acc 0.960"), report("acc 0.938")).status == FAIL


def test_fractions_percentages_counts_and_other_candidates_pass():
    assert judge(report("acc 0.960"), report("acc 96.0%"), report("Accuracy: 480/500 (96%)")).status == PASS
    assert judge(report("acc 0.9599999785423279")).status == PASS
    training = [candidate(0.96, 480, 500), candidate(0.912, 467, 512, "training")]
    assert judge(report("accuracy: 0.912 - val_accuracy: 0.960", training)).status == PASS
    per_batch = [candidate(0.96, 480, 500), candidate(0.9625, what="evaluation, mean of per-batch accuracies")]
    assert judge(report("acc 0.963", per_batch)).status == PASS


def test_a_summary_printed_after_a_later_evaluation_may_report_an_earlier_one():
    """The distillation tutorial prints the teacher's accuracy at the end, after evaluating the student."""
    assert judge({**report("Teacher accuracy: 91.00%"), "before": [0.91, 0.89]}).status == PASS
    assert judge({**report("Teacher accuracy: 3462.50%"), "before": [0.91, 0.89]}).status == FAIL
    assert judge(report("Teacher accuracy: 91.00%", earlier=[0.91])).status == FAIL  # a best's list is not that


def test_a_best_accuracy_is_judged_against_every_earlier_evaluation_or_its_start():
    assert judge(report("acc 0.960 best acc 0.971", earlier=[0.93, 0.971, 0.96])).status == PASS
    assert judge(report("best acc: 0.00%", earlier=[0.96])).status == PASS
    assert judge(report("best acc: 5800.00%", earlier=[0.93, 0.96])).status == FAIL


def test_several_forwards_per_batch_cannot_tell():
    finding = judge(report("acc 0.676", clean=False))
    assert finding.status == CANNOT_TELL and "several scored forwards per batch" in finding.message
    assert judge(report("acc 0.676", clean=False), report("acc 120.0")).status == FAIL


def test_nothing_printed_after_an_evaluation_cannot_tell_and_no_evaluation_is_not_applicable():
    finding = judge(prints=12, untied=3)
    assert finding.status == CANNOT_TELL and "12 prints seen, 3 with an accuracy during training" in finding.message
    assert judge(evaluations=0).status == NOT_APPLICABLE


def test_observations_are_json_safe():
    observation = reported_metric.Observation([report("acc 0.960", earlier=[0.9])], 4, 1, 0, 5)
    assert json.loads(json.dumps(asdict(observation)))["reports"][0]["readings"][0]["text"] == "0.960"
