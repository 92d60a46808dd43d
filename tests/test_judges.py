"""Judging is pure: the decisions on edge cases, from hand-made observations."""
from __future__ import annotations

from checker.facts import PassFacts, RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import grads_accumulate, graphs_retained, health, lr_schedule, worker_rng
from checker.probes.lr_schedule import ScheduleRecord


def facts(passes=(), first=1, losses=(1.4, 1.0, 0.5), updates=None, backwards=None, **more) -> RunFacts:
    return RunFacts(
        passes=[PassFacts(0, role, b, u) for role, b, u in passes],
        backwards_before_first_update=first,
        losses=list(losses),
        updates=sum(u for _, _, u in passes) if updates is None else updates,
        backwards=sum(b for _, b, _ in passes) if backwards is None else backwards,
        **more,
    )


def test_skipped_updates_allows_gradient_accumulation_but_not_skipping():
    assert facts([("train", 16, 8), ("train", 16, 8)], first=2).skipped_updates() == (0, 32)
    assert facts([("train", 16, 16), ("eval", 4, 0)]).skipped_updates() == (0, 16)
    assert facts([("train", 16, 16), ("train", 16, 10)]).skipped_updates() == (6, 32)


def test_without_dataloaders_a_batch_is_a_backward_pass():
    assert facts(updates=40, backwards=40).skipped_updates() == (0, 40)
    assert facts(updates=10, backwards=40, first=4).skipped_updates() == (0, 40)  # accumulation over 4
    assert facts(updates=20, backwards=40).skipped_updates() == (19, 40)


def schedule(kind, horizon=None, calls=48, updates=48, epochs=3, **more) -> lr_schedule.Observation:
    record = ScheduleRecord(kind, more.pop("base", kind), horizon, calls, updates_at_first_call=1, updates=updates,
                            epochs=epochs, lrs=more.pop("lrs", [0.1] * updates), **more)
    return lr_schedule.Observation([record])


def status(obs) -> str:
    return lr_schedule.judge(obs, facts()).status


def test_a_horizon_that_matches_neither_steps_nor_epochs_cannot_be_told():
    assert status(schedule("CosineAnnealingLR", 200, calls=3)) == CANNOT_TELL  # per epoch, T_max longer than the run
    assert status(schedule("CosineAnnealingLR", 200, calls=48)) == CANNOT_TELL  # moved per step: still not a pass


def test_only_unambiguous_horizons_fail():
    assert status(schedule("CosineAnnealingLR", 48, calls=3)) == FAIL  # horizon in steps, stepped per epoch
    assert status(schedule("CosineAnnealingLR", 3, calls=48)) == FAIL  # horizon in epochs, stepped per step
    assert status(schedule("CosineAnnealingLR", 3, calls=3)) == PASS
    assert status(schedule("CosineAnnealingLR", 48, calls=48)) == PASS
    assert status(schedule("LinearLR", 10, calls=48)) == PASS  # a warm-up shorter than the run


def test_step_schedules_must_be_stepped_per_step():
    assert status(schedule("OneCycleLR", 48, calls=48)) == PASS
    assert status(schedule("OneCycleLR", 3, calls=3)) == FAIL  # the total_steps=epochs "workaround"


def test_schedules_whose_intent_is_code_cannot_be_told():
    assert status(schedule("WarmupLinear", base="LambdaLR", calls=48)) == CANNOT_TELL
    assert status(schedule("WarmupLinear", base="LambdaLR", calls=3)) == CANNOT_TELL
    assert status(schedule("ReduceLROnPlateau", calls=3)) == PASS
    assert status(schedule("StepLR", calls=48)) == CANNOT_TELL


def test_stepping_ahead_of_the_optimizer_and_a_collapsed_rate_fail():
    ahead = schedule("OneCycleLR", 48)
    ahead.schedulers[0].updates_at_first_call = 0
    assert status(ahead) == FAIL
    ahead.schedulers[0].skipped_before_first_call = True  # a GradScaler skipped the first update
    assert status(ahead) == PASS
    collapsed = [0.1] * 8 + [0.1 * 0.1 ** n for n in range(1, 41)]
    assert status(schedule("StepLR", calls=48, lrs=collapsed)) == FAIL


def test_nested_schedulers_are_judged_through_their_parent():
    obs = schedule("LinearLR", 5, calls=0, nested=True)
    assert lr_schedule.judge(obs, facts()).status == NOT_APPLICABLE


def judge_graphs(*series, evals=()):
    return graphs_retained.judge(graphs_retained.Observation(10, list(series), list(evals)), facts())


def test_bounded_live_graphs_pass_and_growth_fails():
    assert judge_graphs([1] * 20).status == PASS
    assert judge_graphs([1, 2] * 10).status == PASS  # the last loss kept through validation
    assert judge_graphs([1, 2, 3, 4, 5, 6, 7, 8, 9, 10] + [10] * 10).status == PASS  # a bounded buffer levels off
    assert judge_graphs(list(range(1, 17)) * 3).status == FAIL  # growth cut back only at epoch end
    assert judge_graphs([1] * 20, evals=[[1, 2, 3, 4, 5]]).status == FAIL  # a validation loss summed with its graph
    assert judge_graphs([5, 7, 9, 11, 13, 15], [4, 6, 8, 10, 12, 14]).status == FAIL  # per optimizer of a GAN
    assert judge_graphs([1, 2, 3]).status == NOT_APPLICABLE  # too short to tell


def test_growth_is_a_run_of_rises_ended_by_a_drop_or_the_end():
    assert graphs_retained.growth([1, 2, 3, 4, 5, 1, 2]) == (4, 1, 5)
    assert graphs_retained.growth([1, 2, 3, 4, 5, 5]) == (0, 0, 0)


def test_fewer_than_two_updates_cannot_show_stale_gradients():
    obs = grads_accumulate.Observation(1, 0, [0])
    assert grads_accumulate.judge(obs, facts()).status == NOT_APPLICABLE


def report(start, worker, workers=2, generator="dataset.rng", loader=0, epoch=0):
    return {"loader": loader, "pass": epoch, "worker": worker, "workers": workers, "generator": generator, "start": start}


def rng(*reports):
    return worker_rng.judge(worker_rng.Observation(list(reports)), facts())


def test_worker_rng_counts_replayed_starts_across_workers_and_epochs():
    assert rng(report("a", 0), report("b", 1), report("c", 0, epoch=1), report("d", 1, epoch=1)).status == PASS
    replayed = rng(report("a", 0), report("b", 1), report("a", 0, epoch=1))
    assert replayed.status == FAIL and replayed.measured == "1 of 3 repeated"


def test_loading_in_the_main_process_cannot_tell_and_no_randomness_is_not_applicable():
    assert rng(report("a", "main", workers=0)).status == CANNOT_TELL
    assert rng().status == NOT_APPLICABLE


def rows(obs, run) -> dict[str, str]:
    return {p.probe: p.status for p in health.judge(obs, run).parts}


def test_health_criteria_apply_only_where_their_premise_holds():
    vae = health.Observation(first_loss="binary_cross_entropy", initial=None, classes=None)
    parts = rows(vae, facts([("train", 16, 16)], losses=[540, 300, 200, 150, 120]))
    assert parts["health.initial-loss"] == NOT_APPLICABLE and parts["health.val-accuracy"] == NOT_APPLICABLE
    gan = rows(health.Observation(), facts([("train", 16, 32)], losses=[0.7, 1.2, 0.9, 1.4, 1.1], adversarial=True))
    assert gan["health.loss-falls"] == NOT_APPLICABLE and gan["health.updates-every-batch"] == PASS


def test_a_negative_loss_that_falls_is_learning():
    parts = rows(health.Observation(), facts([("train", 16, 16)], losses=[-1.0, -2.0, -4.0, -8.0, -9.0]))
    assert parts["health.loss-falls"] == PASS


def test_health_uses_the_loss_functions_own_first_value():
    obs = health.Observation(first_loss="cross_entropy", initial=1.4, classes=4,
                             accuracy={"correct": 90, "total": 100, "majority": 25, "source": "loss"})
    assert health.judge(obs, facts([("train", 16, 8), ("eval", 2, 0)], first=2, losses=[0.7, 0.6, 0.3, 0.2])).status == PASS


def test_health_fails_when_nothing_is_learned():
    obs = health.Observation(classes=2, accuracy={"correct": 52, "total": 100, "majority": 50, "source": "output"})
    flat = health.judge(obs, facts([("train", 16, 16)], losses=[0.69] * 16))
    assert {p.probe for p in flat.parts if p.status == FAIL} == {"health.loss-falls", "health.val-accuracy"}


def test_a_slow_fall_passes_only_where_the_validation_accuracy_shows_learning():
    """A short run of a slow optimizer (the quickstart's SGD at 1e-3): 4 % down, 0.51 accuracy against chance 0.11."""
    slow = [2.3, 2.29, 2.28, 2.28, 2.26, 2.25, 2.24, 2.23, 2.22, 2.21]
    learned = health.Observation(classes=10, accuracy={"correct": 51, "total": 100, "majority": 11, "source": "loss"})
    assert rows(learned, facts([("train", 10, 10)], losses=slow))["health.loss-falls"] == PASS
    guessing = health.Observation(classes=10, accuracy={"correct": 13, "total": 100, "majority": 11, "source": "loss"})
    assert rows(guessing, facts([("train", 10, 10)], losses=slow))["health.loss-falls"] == FAIL
    rising = list(reversed(slow))  # accuracy cannot excuse a loss that went up
    assert rows(learned, facts([("train", 10, 10)], losses=rising))["health.loss-falls"] == FAIL


def test_a_per_step_schedule_that_decays_to_zero_at_the_last_step_spans_the_run():
    linear = [0.1 * min(1, (k + 1) / 10) * (100 - k) / 100 for k in range(100)]
    assert status(schedule("WarmupLinear", base="LambdaLR", calls=100, updates=100, epochs=0, lrs=linear)) == PASS
    cut_short = linear[:60]
    assert status(schedule("WarmupLinear", base="LambdaLR", calls=60, updates=60, epochs=0, lrs=cut_short)) == CANNOT_TELL


def test_losses_are_judged_per_updater_and_not_when_they_take_both_signs():
    stages = facts([("train", 40, 40)], losses=[1.6, 1.0, 0.5, 0.1, 0.05] * 4 + [9.0, 7.0, 5.0, 3.0, 1.5] * 4,
                   loss_groups=[0] * 20 + [1] * 20)
    assert rows(health.Observation(), stages)["health.loss-falls"] == PASS  # a teacher's, then a student's loss
    surrogate = facts([("train", 10, 10)], losses=[-0.2, 0.3, -0.1, 0.25, -0.4, 0.1, -0.3, 0.2, -0.35, 0.15])
    assert rows(health.Observation(), surrogate)["health.loss-falls"] == NOT_APPLICABLE


def test_a_staircase_of_bursts_fails_where_one_step_per_update_was_due():
    """OneCycleLR stepped as often as there are updates, but all of an epoch's steps at its end: a staircase."""
    stairs = [0] * 15 + [16]
    obs = schedule("OneCycleLR", 48, calls=48, gaps=[0] + stairs * 3)
    assert status(obs) == FAIL
    assert "in bursts" in lr_schedule.judge(obs, facts()).message
    assert status(schedule("OneCycleLR", 48, calls=48, gaps=[1] * 48)) == PASS
    assert status(schedule("StepLR", calls=3, gaps=[0] + ([0] * 15 + [1]) * 3)) == PASS  # once per epoch
    resumed = schedule("OneCycleLR", 48, calls=48, gaps=[30] + [1] * 47)  # a fast-forward before training
    assert status(resumed) == PASS


def test_an_epoch_schedule_stepped_per_update_fails_once_its_rate_collapses():
    per_batch = [0.1 * 0.7 ** n for n in range(48)]  # StepLR(step_size=1, gamma=0.7), stepped per batch
    assert status(schedule("StepLR", calls=48, lrs=per_batch)) == FAIL
    gentle = [0.1 * 0.999 ** n for n in range(48)]  # ExponentialLR(gamma=0.999) per batch: a per-step decay
    assert status(schedule("ExponentialLR", calls=48, lrs=gentle)) == CANNOT_TELL
    short = [0.1 * 0.7 ** n for n in range(10)]  # 10 updates: the rate fell to 0.03, not yet collapsed
    assert status(schedule("StepLR", calls=10, updates=10, epochs=2, lrs=short)) == CANNOT_TELL


def test_a_decay_stepped_past_its_horizon_fails_and_a_warm_up_does_not():
    assert status(schedule("CosineAnnealingLR", 10, calls=48, gaps=[1] * 48)) == FAIL  # the cosine climbs back
    finding = lr_schedule.judge(schedule("CosineAnnealingLR", 10, calls=48, gaps=[1] * 48), facts())
    assert "ended at update 10 of 48" in finding.message
    assert status(schedule("PolynomialLR", 20, calls=48)) == FAIL  # stays at zero for the rest of the run
    assert status(schedule("LinearLR", 10, calls=48)) == PASS
    assert status(schedule("CosineAnnealingLR", 48, calls=48)) == PASS


def test_a_stage_that_continues_a_trained_model_need_not_fall_but_a_fresh_stalled_one_fails():
    first = [2.0 - 0.04 * i for i in range(30)] + [0.84 + 0.001 * (i % 2) for i in range(20)]  # falls, then settles
    level = [0.84 + 0.002 * (i % 3) for i in range(30)]  # a second optimizer goes on from there: flat
    groups = [0] * 50 + [1] * 30
    continued = health.loss_falls(facts(losses=first + level, loss_groups=groups, updates=80, backwards=80))
    assert continued.status == PASS  # the first stage fell; the second, which continued it, is not held to falling
    still = [2.0 - 0.03 * i for i in range(50)] + [0.5 - 0.0005 * i for i in range(30)]  # stage 1 still falling
    assert health.loss_falls(facts(losses=still, loss_groups=groups, updates=80, backwards=80)).status == FAIL
    fresh = health.loss_falls(facts(losses=first + [1.9] * 30, loss_groups=groups, updates=80, backwards=80))
    assert fresh.status == FAIL  # a new stage that starts high and never learns


def test_a_steady_slow_fall_is_learning_and_a_noisy_one_must_fall_further():
    """A layer-local objective with a floor, full-batch (forward-forward's second layer): 9.9 % down, every late
    loss below every early one, is learning; the same 9.9 % within noise of a flat loss is not."""
    steady = [0.764 - 0.0014 * i for i in range(60)]
    finding = health.loss_falls(facts(losses=steady, updates=60, backwards=60))
    assert finding.status == PASS and "steadily" in finding.message
    noisy = [0.75 + (0.12 if i % 2 else -0.12) - 0.0012 * i for i in range(60)]
    assert health.loss_falls(facts(losses=noisy, updates=60, backwards=60)).status == FAIL
    creeping = [0.5 - 0.0005 * i for i in range(60)]  # steady, but 5 % of nothing: 0.5 to 0.473
    assert health.loss_falls(facts(losses=creeping, updates=60, backwards=60)).status == FAIL
    onto_chance = [0.76 - 0.0012 * i for i in range(60)]  # a broadcast loss settling on ln(2): the labels' mean
    assert health.loss_falls(facts(losses=onto_chance, updates=60, backwards=60), classes=2).status == FAIL
    assert health.loss_falls(facts(losses=steady, updates=60, backwards=60), classes=8).status == PASS


def test_losses_that_sum_an_episode_are_judged_per_forward():
    lengths = [4, 6, 9, 12, 16, 20, 26, 32, 40, 40] * 2
    growing = [2.0 * n for n in lengths]  # per forward constant: an episode's summed loss follows its length
    part = health.loss_falls(facts(losses=growing, loss_forwards=lengths, updates=20, backwards=20))
    assert part.status == NOT_APPLICABLE and "varying number of forwards" in part.message
    learning = [n * (2.0 - 0.08 * i) for i, n in enumerate(lengths)]  # per forward it falls: learning
    assert health.loss_falls(facts(losses=learning, loss_forwards=lengths, updates=20, backwards=20)).status == PASS


def test_no_loss_through_backward_leaves_the_loss_unjudged_but_non_finite_losses_fail():
    """Gradients from torch.autograd.grad (or torch.func.grad) assigned to .grad: updates, no backward() loss."""
    functional = rows(health.Observation(), facts([("train", 16, 16)], losses=[]))
    assert functional["health.loss-falls"] == NOT_APPLICABLE
    nan = rows(health.Observation(), facts([("train", 16, 16)], losses=[None] * 16))
    assert nan["health.loss-falls"] == FAIL
