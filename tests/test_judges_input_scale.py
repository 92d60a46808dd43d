"""input-scale: the judge on hand-made observations (no runs)."""
from __future__ import annotations

from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import input_scale


def model(kind="float", rms=(1.0,) * 8, name="Classifier", layer="Linear", normalised=""):
    return {"model": name, "layer": layer, "kind": kind, "rms": list(rms) if kind == "float" else [],
            "forwards": len(rms), "normalised": normalised}


def judge(*models):
    return input_scale.judge(input_scale.Observation(list(models), 16), RunFacts())


def test_raw_units_fail_and_the_symptom_names_no_cause():
    finding = judge(model(rms=[112.0] * 16))
    assert finding.status == FAIL and finding.measured == "RMS 112"
    assert finding.observed == ("the first layer of Classifier (Linear) received inputs with an RMS of 112 "
                                "(median of 16 training forwards)")
    assert "standardise" in finding.message
    for word in ("raw", "standardis", "normalis", "mean", "std"):
        assert word not in finding.observed


def test_the_threshold_and_the_median():
    assert judge(model(rms=[11.2] * 16)).status == FAIL  # raw readings divided by 10
    assert judge(model(rms=[7.9] * 16)).status == PASS
    assert judge(model(rms=[1.0, 1.0, 1.0, 200.0])).status == PASS  # one odd batch does not decide
    assert judge(model(rms=[0.5] * 4), model(rms=[120.0] * 4, name="Discriminator", layer="Conv2d")).status == FAIL


def test_a_first_layer_that_normalises_passes_with_the_reason():
    finding = judge(model("normalising", layer="BatchNorm1d"))
    assert finding.status == PASS and "BatchNorm1d, normalises its inputs itself" in finding.message
    assert finding.observed == "Classifier: its first layer normalises its inputs itself"  # no layer named


def test_token_ids_and_no_training_are_not_applicable_and_no_tensor_cannot_tell():
    assert judge(model("integer", layer="Embedding")).status == NOT_APPLICABLE
    assert judge().status == NOT_APPLICABLE
    assert judge(model("other", layer="LSTM")).status == CANNOT_TELL
    assert judge(model("integer", layer="Embedding"), model(rms=[0.9] * 4, name="Head")).status == PASS


def test_raw_units_into_a_layer_normalised_straight_after_advise_and_name_the_layer_that_undoes_them():
    finding = judge(model(rms=[120.0] * 16, layer="Conv2d", normalised="BatchNorm2d"))
    assert finding.status == ADVICE and finding.measured == "RMS 120"
    assert "straight into BatchNorm2d" in finding.message and "no harm" in finding.message
    assert "BatchNorm" not in finding.observed  # the symptom names no cause
    # one model normalised after, another not: the harm of the other decides
    other = model(rms=[90.0] * 4, name="Critic", layer="Linear")
    assert judge(model(rms=[120.0] * 4, normalised="BatchNorm1d"), other).status == FAIL
