"""divergence: the judge on hand-made observations (losses and gradient norms as a run would record them); the checked
fixtures (tests/fixtures/divergence__*.py) run it end to end, and one of them here for what its series hold."""
from __future__ import annotations

import math

from conftest import FIXTURES

from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS
from checker.probes.divergence import Observation, growth_onset, judge

LN4 = math.log(4)


def falling(n: int, start: float = LN4, end: float = 0.3) -> list[float]:
    return [start + (end - start) * i / (n - 1) for i in range(n)]


def test_the_onset_is_where_the_last_growth_began_not_where_the_run_broke():
    assert growth_onset([1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 5.0, 20.0, 80.0]) == 6
    assert growth_onset([1.0, 4.0, 16.0, 64.0]) == 1
    assert growth_onset([2.0, 1.0, 2.0, 1.0]) == 0  # nothing stayed above three times the median before it


def test_a_non_finite_run_after_growing_gradients_fails_at_the_update_the_growth_began():
    norms = [1.8, 1.5, 1.7, 1.6, 1.9, 8.9, 61.4, 420.0, None, None]
    finding = judge(Observation(grad_norms=norms), RunFacts(updates=10, losses=[1.0] * 8 + [None, None]))
    assert finding.status == FAIL
    assert "started at update 6" in finding.message and "non-finite at update 9" in finding.message
    assert "learning rate" not in finding.observed and "update 6" in finding.observed


def test_non_finite_without_growth_or_from_the_start_is_not_a_divergence():
    flat = judge(Observation(grad_norms=[1.0, 1.1, 0.9, 1.0, None]), RunFacts(losses=[0.7] * 4 + [None]))
    assert flat.status == NOT_APPLICABLE and "without the gradient norm growing" in flat.message
    early = judge(Observation(grad_norms=[1.0, None, None]), RunFacts(losses=[0.7, None, None]))
    assert early.status == NOT_APPLICABLE and "from its first updates" in early.message


def test_a_class_loss_that_climbs_and_ends_at_chance_fails_and_one_that_recovers_passes():
    climbed = [LN4, 1.5, 3.0, 9.0, 40.0, 120.0, 30.0, 8.0, 2.0, 1.5, 1.45, 1.42]
    finding = judge(Observation(kind="cross_entropy", classes=4, losses=climbed), RunFacts())
    assert finding.status == FAIL and "rising from step 3" in finding.observed and "ln(4)" in finding.observed
    recovered = climbed[:8] + [0.6, 0.4, 0.3, 0.2, 0.2, 0.2]
    finding = judge(Observation(kind="cross_entropy", classes=4, losses=recovered), RunFacts())
    assert finding.status == PASS and "recovered" in finding.message


def test_a_loss_that_begins_far_above_chance_is_noise_no_climb_is_measured_from():
    """Inputs in raw units: the untrained loss is anywhere from 5 to 36 by the initialisation's luck, and each batch's
    is noise around a falling level; a first value of 5 is not where an untrained classifier begins."""
    noisy = [5.0, 6.65, 10.87, 12.36, 12.06, 24.4, 8.04, 28.23, 10.76, 25.82, 17.93, 14.03, 7.21, 5.48, 13.39, 6.26,
             23.11, 8.66, 17.05, 9.01, 18.76, 16.19, 9.34, 12.37, 22.46, 2.63, 6.01, 11.34, 9.2, 14.61, 14.49, 4.74,
             10.77, 16.74, 4.75, 4.9, 6.45, 4.05, 3.4, 3.82, 10.97, 20.37, 10.39, 3.78, 6.74, 8.98, 8.23, 7.9, 17.55,
             4.52, 9.28, 3.4, 8.08, 8.54, 4.51, 12.41, 2.48, 3.01, 9.26, 14.99, 9.62, 1.6, 2.67, 5.65]
    finding = judge(Observation(kind="cross_entropy", classes=2, losses=noisy), RunFacts())
    assert finding.status == NOT_APPLICABLE and "far above chance" in finding.message, finding.message
    started_well = [0.7, 0.69, 0.71] + noisy[3:]  # the same run from an untrained classifier's start: a climb
    assert judge(Observation(kind="cross_entropy", classes=2, losses=started_well), RunFacts()).status == FAIL


def test_a_loss_that_never_learned_without_climbing_is_health_s_finding_not_this_one():
    flat = [LN4] * 20
    assert judge(Observation(kind="cross_entropy", classes=4, losses=flat), RunFacts()).status == PASS


def test_premises_no_class_loss_too_few_losses_adversarial():
    assert judge(Observation(), RunFacts(losses=[5.0, 50.0, 500.0])).status == NOT_APPLICABLE  # a regression's loss
    few = judge(Observation(kind="nll_loss", classes=4, losses=[LN4, 40.0, 40.0]), RunFacts())
    assert few.status == NOT_APPLICABLE and "too few" in few.message
    climbed = Observation(kind="cross_entropy", classes=4, losses=[LN4, 9.0, 40.0] + [3.0] * 10)
    assert judge(climbed, RunFacts(adversarial=True)).status == NOT_APPLICABLE


def test_a_hand_written_loss_over_the_model_s_classes_is_read_from_the_losses_handed_to_backward():
    climbed = [0.7, 0.8, 3.0, 12.0, 13.8, 13.8, 13.8, 13.8, 13.8, 13.8, 13.8, 13.8]
    obs = Observation(fallback_classes=2)
    assert judge(obs, RunFacts(losses=climbed)).status == FAIL
    assert judge(Observation(fallback_classes=2), RunFacts(losses=falling(12, 0.7, 0.05))).status == PASS
    # accumulation: the losses handed to backward are divided by it, the class loss is not
    quarter = [v / 4 for v in [0.7, 0.72, 0.69, 0.71] + climbed[4:]]  # the first 4: the untrained model's
    assert judge(Observation(fallback_classes=2), RunFacts(losses=quarter, backwards_before_first_update=4)).status == FAIL


def test_each_training_loss_is_recorded_once_even_where_another_probe_wraps_its_tensors(checked):
    """The first steps run under loss-shapes' tensor subclass, which dispatches F.cross_entropy back to its patched
    name: one loss, one value (the climb's step numbers count updates)."""
    (report,) = checked(FIXTURES / "divergence__broken_adam_climbs.py")
    series = next(f for f in report.findings if f.probe == "divergence").series
    losses, norms = series["class loss per step"], series["gradient norm per update (before clipping)"]
    assert len(losses) == len(norms) == 48 and losses[0] != losses[1]


def test_a_queue_filling_climb_with_every_target_in_slot_zero_is_not_judged_but_in_batch_positives_are():
    """MoCo: the positive is always logit 0 and the negatives come from a queue whose random start real keys replace,
    so the loss climbs from an easy start to near chance by design. SimCLR's positives on the diagonal (arange(B))
    face the batch itself: a climb there is a climb."""
    climb = [0.3, 0.3, 0.8, 2.0, 4.0, 5.4, 5.5, 5.5, 5.45, 5.5, 5.5, 5.5]
    k = 257  # ln(257) = 5.55
    updates = [0, 0] + [1] * 10
    queue = judge(Observation(kind="cross_entropy", classes=k, losses=climb, loss_updates=updates, slot="class 0"),
                  RunFacts(updates=10, losses=climb))
    assert queue.status == NOT_APPLICABLE and "class 0" in queue.message
    in_batch = judge(Observation(kind="cross_entropy", classes=k, losses=climb, loss_updates=updates,
                                 slot="its own row's position (0, 1, 2, ...)"), RunFacts(updates=10, losses=climb))
    assert in_batch.status == FAIL
