"""Judging is pure: the decisions on edge cases, from hand-made observations."""
from __future__ import annotations

from checker.facts import skipped_updates
from checker.findings import FAIL, NOT_APPLICABLE, PASS
from checker.probes import health, lr_schedule, worker_rng


def facts(passes, first=1, losses=(1.4, 1.0, 0.5), steps=None):
    return {
        "passes": [{"loader": 0, "role": role, "batches": b, "steps": s, "backwards": b} for role, b, s in passes],
        "backwards_before_first_step": first,
        "losses": list(losses),
        "steps": sum(s for _, _, s in passes) if steps is None else steps,
        "params_finite": True,
    }


def test_skipped_updates_allows_gradient_accumulation_but_not_skipping():
    assert skipped_updates(facts([("train", 16, 8), ("train", 16, 8)], first=2)) == (0, 32)
    assert skipped_updates(facts([("train", 16, 16), ("eval", 4, 0)])) == (0, 16)
    assert skipped_updates(facts([("train", 16, 16), ("train", 16, 10)])) == (6, 32)


def scheduler(kind, horizon=None, steps=64, epochs=4):
    return {"type": kind, "horizon": horizon, "steps": steps, "epochs": epochs}


def test_intended_granularity_follows_the_scheduler_kind_and_horizon():
    assert lr_schedule.intended(scheduler("OneCycleLR", 4)) == "per_step"
    assert lr_schedule.intended(scheduler("StepLR")) == "per_epoch"
    assert lr_schedule.intended(scheduler("CosineAnnealingLR", 60)) == "per_step"
    assert lr_schedule.intended(scheduler("CosineAnnealingLR", 5)) == "per_epoch"
    assert lr_schedule.intended(scheduler("LambdaLR")) is None


def test_unknown_scheduler_passes_at_either_granularity():
    s = {**scheduler("LambdaLR"), "observed": [1.0] * 4, "step_ordinals": [0, 0, 1, 1],
         "per_step": {"mismatches": 2, "error": None, "expected": []},
         "per_epoch": {"mismatches": 0, "error": None, "expected": []}}
    assert lr_schedule.judge({"schedulers": [s]}, {}).status == PASS


def test_a_staircase_is_described_as_changing_only_between_epochs():
    assert lr_schedule.shape_of([1, 1, 2, 2], [0, 0, 1, 1]) == "it changed only between epochs"
    assert lr_schedule.shape_of([1, 1, 1, 1], [0, 0, 1, 1]) == "it never changed"


def report(start, worker, workers=2, generator="dataset.rng", loader=0, epoch=0):
    return {"loader": loader, "pass": epoch, "worker": worker, "workers": workers, "generator": generator, "start": start}


def test_worker_rng_counts_replayed_starts_across_workers_and_epochs():
    distinct = [report("a", 0), report("b", 1), report("c", 0, epoch=1), report("d", 1, epoch=1)]
    assert worker_rng.judge({"reports": distinct}, {}).status == PASS
    replayed = worker_rng.judge({"reports": [report("a", 0), report("b", 1), report("a", 0, epoch=1)]}, {})
    assert replayed.status == FAIL and replayed.measured == "1 of 3 repeated"


def test_worker_rng_rejects_loading_in_one_process_and_skips_no_randomness():
    assert worker_rng.judge({"reports": [report("a", "main", workers=0)]}, {}).status == FAIL
    assert worker_rng.judge({"reports": []}, {}).status == NOT_APPLICABLE


def test_health_scales_the_first_loss_by_the_accumulation_factor():
    obs = {"classes": 4, "accuracy": {"correct": 90, "total": 100, "majority": 25}}
    accumulated = facts([("train", 16, 8), ("eval", 2, 0)], first=2, losses=[0.7, 0.6, 0.3, 0.2])
    parts = {p.probe: p.status for p in health.judge(obs, accumulated).parts}
    assert parts["health.initial-loss"] == PASS
    assert health.judge(obs, accumulated).status == PASS


def test_health_fails_when_nothing_is_learned():
    obs = {"classes": 2, "accuracy": {"correct": 52, "total": 100, "majority": 50}}
    flat = health.judge(obs, facts([("train", 16, 16)], losses=[0.69] * 16))
    failed = {p.probe for p in flat.parts if p.status == FAIL}
    assert failed == {"health.loss-falls", "health.val-accuracy"}
