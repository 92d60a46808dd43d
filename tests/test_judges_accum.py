"""The training-step bookkeeping judges (accum-mean, clip-units, resume-state, lr-schedule per micro-batch) on
hand-made observations, no training."""
from __future__ import annotations

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import accum_mean, clip_units, lr_schedule, resume_state
from checker.probes.lr_schedule import ScheduleRecord


def accum(ratios=(), errors=(), k=2, undetermined=()):
    obs = accum_mean.Observation(len(ratios) + len(undetermined), [k] * (len(ratios) + len(undetermined)),
                                 list(ratios), list(errors), list(undetermined))
    return accum_mean.judge(obs, RunFacts())


def test_accumulated_gradient_k_times_the_mean_fails_and_the_mean_passes():
    assert accum([1.0] * 6, [1e-7] * 6).status == PASS
    failed = accum([4.0] * 6, [3.0] * 6, k=4)
    assert failed.status == FAIL and "4 times" in failed.message
    for word in ("divid", "sum", "loss"):
        assert word not in failed.observed


def test_an_unreadable_normalisation_or_another_mismatch_cannot_be_told():
    assert accum(undetermined=["a loss reduced by 'sum'"]).status == CANNOT_TELL
    assert accum([0.5] * 6, [0.5] * 6).status == CANNOT_TELL  # half the mean: neither the mean nor the sum
    assert accum([1.0] * 5, [1e-7] * 5, undetermined=["gradients reset between the micro-batches"]).status == CANNOT_TELL
    assert accum_mean.judge(accum_mean.Observation(), RunFacts()).status == NOT_APPLICABLE


def test_the_applied_norm_must_be_the_clipped_norm():
    ok = clip_units.Observation(3, 0, [0.5, 0.5, 0.3], [0.49999, 0.5, 0.3])
    assert clip_units.judge(ok, RunFacts()).status == PASS
    scaled = clip_units.Observation(2, 2, [0.5, 0.5], [7.6e-6, 7.6e-6])
    finding = clip_units.judge(scaled, RunFacts())
    assert finding.status == FAIL and "scale" not in finding.observed
    assert clip_units.judge(clip_units.Observation(), RunFacts()).status == NOT_APPLICABLE


def test_a_resume_with_fresh_state_or_a_restarted_schedule_fails():
    def judged(**fields):
        return resume_state.judge(resume_state.Observation(resumes=1, **fields), RunFacts()).status

    assert judged() == PASS
    assert judged(fresh_state=1) == FAIL
    assert judged(lr_off=1, saved_lrs=[2.5e-3], resumed_lrs=[1e-3], saved_step=12, resumed_step=0) == FAIL
    assert resume_state.judge(resume_state.Observation(), RunFacts()).status == NOT_APPLICABLE


def test_a_schedule_stepped_per_micro_batch_fails_unless_its_horizon_counts_micro_batches():
    def judged(calls, backwards, horizon=None, base="LambdaLR"):
        record = ScheduleRecord("S", base, horizon, calls, updates_at_first_call=1, updates=24, epochs=3,
                                lrs=[0.1] * 24, backwards=backwards)
        return lr_schedule.judge(lr_schedule.Observation([record]), RunFacts()).status

    assert judged(48, 48) == FAIL  # once per backward, two backwards per update
    assert judged(24, 48) == CANNOT_TELL  # once per update: a LambdaLR's intent is code
    assert not lr_schedule.per_backward(ScheduleRecord("S", "OneCycleLR", 48, 48, updates=24, epochs=3, backwards=48))
    assert not lr_schedule.per_backward(ScheduleRecord("S", "LambdaLR", None, 24, updates=24, epochs=3, backwards=24))
