"""weights-update judging, from hand-made observations: no run."""
from __future__ import annotations

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import updates_applied
from checker.probes.updates_applied import Observation, judge


def group(name="AdamW", params=8, applied=8, steps=64, span=64, quiet=False) -> dict:
    return {"optimizer": name, "params": params, "applied": applied, "steps": steps, "span": span, "quiet": quiet}


def facts(backwards=64, updates=64, **more) -> RunFacts:
    return RunFacts(backwards=backwards, updates=updates, **more)


def test_no_backward_is_not_applicable_and_says_why():
    finding = judge(Observation(), facts(backwards=0, updates=0))
    assert finding.status == NOT_APPLICABLE and "no backward pass ran" in finding.message
    finding = judge(Observation(), facts(backwards=5, updates=5))
    assert finding.status == NOT_APPLICABLE and "delivered a gradient" in finding.message


def test_gradients_computed_and_never_applied_fail_with_the_count():
    obs = Observation(backwards=64, groups=[group(applied=0, steps=0, quiet=True)])
    finding = judge(obs, facts(updates=0))
    assert finding.status == FAIL
    assert finding.measured == "0 updates after 64 backward passes"
    assert "no optimizer step or manual update" in finding.message
    assert "step" not in finding.symptom and "optimizer" not in finding.symptom  # the symptom names no cause


def test_a_gradscaler_that_skipped_every_step_is_said_so():
    obs = Observation(backwards=10, groups=[group(applied=0, steps=0, quiet=True)])
    finding = judge(obs, facts(backwards=10, updates=0, scaler_skips=10))
    assert finding.status == FAIL and "GradScaler skipped all 10 steps" in finding.message


def test_steps_that_change_nothing_fail_too():
    """Another optimizer stepping, the gradients reset before the step, a learning rate of 0."""
    obs = Observation(backwards=48, groups=[group(applied=0, steps=48)])
    finding = judge(obs, facts(backwards=48, updates=48))
    assert finding.status == FAIL and finding.measured == "48 updates after 48 backward passes"
    assert "none changed" in finding.message


def test_gradient_accumulation_and_scaler_skips_pass():
    obs = Observation(backwards=64, groups=[group(steps=16, span=64)])
    finding = judge(obs, facts(updates=16, scaler_skips=2))
    assert finding.status == PASS and "4 backward passes per update" in finding.message


def test_manual_updates_without_an_optimizer_pass_and_their_absence_fails():
    assert judge(Observation(backwards=40, unheld=6, unheld_applied=6, manual_updates=40), facts(40, 40)).status == PASS
    finding = judge(Observation(backwards=40, unheld=6, unheld_applied=0, manual_updates=0), facts(40, 0))
    assert finding.status == FAIL and finding.measured == "0 updates after 40 backward passes"


def test_unheld_gradients_beside_a_trained_optimizer_are_not_judged():
    """A frozen feature extractor left with requires_grad: its gradients are never applied, by design."""
    obs = Observation(backwards=64, groups=[group()], unheld=4, unheld_applied=0)
    assert judge(obs, facts()).status == PASS


def test_an_optimizer_that_never_steps_beside_one_that_does_fails():
    """A GAN's generator optimizer, a seq2seq encoder's: built over parameters that receive gradients, never stepped.
    Building it declared that they train."""
    obs = Observation(backwards=384, groups=[group("Adam", 10, 10, 128, 384), group("Adam", 8, 0, 0, 256)])
    finding = judge(obs, facts(384, 128))
    assert finding.status == FAIL and "never stepped" in finding.message and finding.measured == "0 steps of Adam"


def test_an_optimizer_that_steps_without_changing_its_parameters_beside_one_that_does_cannot_be_told():
    """A learning rate of 0 held for this run, or gradients reset before its steps: the intent is not clear."""
    obs = Observation(backwards=384, groups=[group("Adam", 10, 10, 128, 384), group("Adam", 8, 0, 128, 256)])
    finding = judge(obs, facts(384, 256))
    assert finding.status == CANNOT_TELL and "never changed" in finding.message


def test_a_stage_whose_optimizer_never_steps_while_nothing_else_updates_fails():
    """Distillation or a linear probe: the second stage's backward passes, and no update at all among them."""
    obs = Observation(backwards=224, groups=[group("Adam", 6, 6, 96, 96), group("Adam", 4, 0, 0, 128, quiet=True)])
    finding = judge(obs, facts(224, 96))
    assert finding.status == FAIL and finding.measured == "0 updates after 128 backward passes"
    one_backward = Observation(backwards=97, groups=[group("Adam", 6, 6, 96, 96), group("SGD", 4, 0, 0, 1, quiet=True)])
    assert judge(one_backward, facts(97, 96)).status == CANNOT_TELL  # a single backward pass is too little to say


def test_two_optimizers_taking_turns_pass():
    obs = Observation(backwards=128, groups=[group("AdamW", 6, 6, 64, 128), group("SGD", 2, 2, 64, 128)])
    assert judge(obs, facts(128, 128)).status == PASS


def test_the_observation_survives_the_record():
    obs = Observation(backwards=3, groups=[group()], unheld=1, unheld_applied=1, manual_updates=2)
    from dataclasses import asdict

    assert updates_applied.Observation(**asdict(obs)) == obs
