"""logit-input: the judge on hand-made observations, and the observer's rule on hand-made loss calls (no training)."""
from __future__ import annotations

import pytest

from checker.events import Event, LossCall
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import logit_input


def site(kind="cross_entropy", calls=48, checked=24, normalised=24, total=1.0, low_targets=False, where=None):
    return {"kind": kind, "where": where or ["train.py:40", "train.py:77"], "calls": calls, "checked": checked,
            "normalised": normalised, "total": total, "low_targets": low_targets}


def judge(*sites, evaluation_calls=0, other_losses=()):
    return logit_input.judge(logit_input.Observation(list(sites), evaluation_calls, list(other_losses)), RunFacts())


def test_probabilities_at_every_checked_call_fail_and_the_symptom_names_no_cause():
    finding = judge(site())
    assert finding.status == FAIL
    assert "softmax" in finding.message and "train.py:40" in finding.message
    assert finding.observed == ("the loss's inputs were non-negative and every row summed to 1 at 24 of 24 training "
                                "calls checked (of 48)")
    for word in ("softmax", "probabilit", "logit", "sigmoid", "normalis"):
        assert word not in finding.observed


def test_a_scaled_softmax_fails_too_and_says_its_row_sum():
    finding = judge(site(total=10.0, calls=3, checked=3, normalised=3))
    assert finding.status == FAIL and finding.observed.endswith("summed to 10 at 3 of 3 training calls checked")


def test_one_call_of_raw_scores_passes():
    assert judge(site(checked=1, normalised=0)).status == PASS
    assert judge(site(checked=5, normalised=4)).status == PASS


def test_one_failing_site_among_raw_ones_fails():
    teacher = site(checked=1, normalised=0, where=["distill.py:44"])
    student = site(checked=20, normalised=20, where=["distill.py:62"])
    finding = judge(teacher, student)
    assert finding.status == FAIL and "distill.py:62" in finding.message


def test_too_few_calls_cannot_tell():
    finding = judge(site(calls=2, checked=2, normalised=2))
    assert finding.status == CANNOT_TELL and "only 2 training calls" in finding.message


def test_binary_scores_in_the_unit_interval_fail_only_when_some_target_was_0():
    assert judge(site("binary_cross_entropy_with_logits", total=None, low_targets=True)).status == FAIL
    undecided = judge(site("binary_cross_entropy_with_logits", total=None, low_targets=False))
    assert undecided.status == CANNOT_TELL and "no target below 1/2" in undecided.message
    assert judge(site("binary_cross_entropy_with_logits", total=None, checked=1, normalised=0)).status == PASS


def test_not_applicable_without_a_loss_on_raw_scores_in_training():
    finding = judge(other_losses=["nll_loss"])
    assert finding.status == NOT_APPLICABLE and "nll_loss" in finding.message
    assert "only without gradients" in judge(evaluation_calls=8).message
    assert judge(site(calls=0, checked=0, normalised=0)).status == NOT_APPLICABLE
    single_class = judge(site(calls=9, checked=0, normalised=0))
    assert single_class.status == NOT_APPLICABLE and "a single class" in single_class.message


# -- the observer's rule, on loss calls made by hand ---------------------------------------------------------


class Session:
    def __init__(self):
        self.listeners = {}

    def on(self, event, owner, callback):
        self.listeners[event] = callback


def observe(inputs, kind="cross_entropy", targets=None):
    """The observation after one training call of ``kind`` per input, all from one line of code."""
    import torch

    session = Session()
    observer = logit_input.Observer(session)
    for x in inputs:
        x = x.detach().requires_grad_()
        target = torch.zeros(x.shape[0], dtype=torch.long) if targets is None else targets
        session.listeners[Event.LOSS](LossCall(kind, x, target, None, "mean", None))
    return observer.summary()


def scores(shape=(32, 5), seed=0, n=20):
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) * 3 for _ in range(n)]


def status(obs):
    return logit_input.judge(obs, RunFacts()).status


@pytest.mark.parametrize("transform", [
    lambda z: z,
    lambda z: z.log_softmax(1),
    lambda z: z / 5.0,
    lambda z: z.relu(),  # non-negative, but rows of different sums
    lambda z: z - z.mean(1, keepdim=True),  # rows sum to 0
    lambda z: z.abs() + 100.0,  # a large common offset: the sums still differ
], ids=["raw", "log_softmax", "temperature", "relu", "centred", "offset"])
def test_raw_scores_pass(transform):
    obs = observe([transform(z) for z in scores()])
    assert status(obs) == PASS
    assert obs.sites[0]["checked"] == 1  # decided at the first call: nothing more is checked


@pytest.mark.parametrize("transform", [
    lambda z: z.softmax(1),
    lambda z: 10 * z.softmax(1),
    lambda z: z.softmax(1).to(__import__("torch").bfloat16),
], ids=["softmax", "scaled", "bfloat16"])
def test_probabilities_fail(transform):
    obs = observe([transform(z) for z in scores()])
    assert status(obs) == FAIL
    assert obs.sites[0]["normalised"] == obs.sites[0]["checked"] == 17  # the first 16, then every 8th of 20


def test_segmentation_shapes_are_read_along_the_class_dimension():
    maps = scores((4, 3, 8, 8))
    assert status(observe(maps)) == PASS
    assert status(observe([z.softmax(1) for z in maps])) == FAIL
    assert status(observe([z.softmax(2) for z in maps])) == PASS  # normalised along the wrong dimension: raw


def test_unbatched_input_needs_the_same_row_sum_across_calls():
    assert status(observe([z.softmax(0) for z in scores((5,))])) == FAIL
    assert status(observe(scores((5,)))) == PASS


def test_calls_are_sampled_after_the_first_sixteen():
    obs = observe([z.softmax(1) for z in scores(n=100)])
    assert obs.sites[0]["calls"] == 100 and obs.sites[0]["checked"] == 16 + len(range(16, 100, 8))


def test_binary_scores():
    import torch

    targets = torch.randint(0, 2, (32,)).float()
    logits = scores((32,))
    assert status(observe(logits, "binary_cross_entropy_with_logits", targets)) == PASS
    assert status(observe([z.sigmoid() for z in logits], "binary_cross_entropy_with_logits", targets)) == FAIL
    ones = torch.ones(32)
    assert status(observe([z.sigmoid() for z in logits], "binary_cross_entropy_with_logits", ones)) == CANNOT_TELL


def test_evaluation_calls_and_other_losses_are_not_judged():
    import torch

    session = Session()
    observer = logit_input.Observer(session)
    probabilities = torch.randn(8, 3).softmax(1)
    session.listeners[Event.LOSS](LossCall("cross_entropy", probabilities, torch.zeros(8, dtype=torch.long), None,
                                           "mean", None))
    session.listeners[Event.LOSS](LossCall("mse_loss", probabilities.requires_grad_(), torch.zeros(8, 3), None,
                                           "mean", None))
    obs = observer.summary()
    assert obs.sites == [] and obs.evaluation_calls == 1 and obs.other_losses == ["mse_loss"]
    assert status(obs) == NOT_APPLICABLE


def test_nll_loss_passes_on_log_probabilities_and_fails_on_probabilities():
    """log_softmax into nll_loss is the correct formulation; a softmax without its log is probabilities again."""
    import torch

    def judged(values) -> str:
        session = Session()
        observer = logit_input.Observer(session)
        for _ in range(4):
            session.listeners[Event.LOSS](LossCall("nll_loss", values.clone().requires_grad_(),
                                                   torch.zeros(8, dtype=torch.long), None, "mean", None))
        return status(observer.summary())

    scores = torch.randn(8, 3)
    assert judged(scores.log_softmax(1)) == PASS
    assert judged(scores.softmax(1)) == FAIL
    assert judged(scores) == NOT_APPLICABLE  # raw scores into nll_loss: not what this rule reads


def test_a_log_softmax_gathered_by_hand_passes_and_one_of_probabilities_fails():
    import torch

    def judged(values) -> str:
        session = Session()
        observer = logit_input.Observer(session)
        for _ in range(4):
            session.listeners[Event.LOG_SOFTMAX](values.clone().requires_grad_(), 1)
        return status(observer.summary())

    scores = torch.randn(8, 3)
    assert judged(scores) == PASS
    assert judged(scores.softmax(1)) == FAIL


def test_call_sites_are_judged_apart_and_a_single_class_is_not_read():
    import torch

    session = Session()
    observer = logit_input.Observer(session)
    target = torch.zeros(16, dtype=torch.long)
    for z in scores((16, 4)):
        z.requires_grad_()
        session.listeners[Event.LOSS](LossCall("cross_entropy", z, target, None, "mean", None))  # a teacher: raw
        session.listeners[Event.LOSS](LossCall("cross_entropy", z.softmax(1), target, None, "mean", None))  # a student
        session.listeners[Event.LOSS](LossCall("cross_entropy", z[:, :1], target, None, "mean", None))  # one class
    obs = observer.summary()
    assert [(s["calls"], s["checked"], s["normalised"]) for s in obs.sites] == [(20, 1, 0), (20, 17, 17), (20, 0, 0)]
    assert all(s["where"][0].startswith("test_judges_logit_input.py:") for s in obs.sites)
    assert status(obs) == FAIL
