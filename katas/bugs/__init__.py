"""The bug catalogue, one module per bug, in teaching order."""
from __future__ import annotations

from katas.bugs import (
    accum_scale,
    accum_sched,
    bptt_leak,
    causal_mask,
    clip_order,
    data_inplace,
    ddp_metric,
    ddp_module,
    ddp_no_sampler,
    ddp_rank_seed,
    ddp_save,
    ddp_set_epoch,
    decay_norm,
    detach,
    detach_alias,
    eval_mode,
    first_order,
    frozen,
    functional_dropout,
    inner_inplace,
    key_mask,
    label_leak,
    label_shift,
    leak,
    log0,
    lr_high,
    metric_count,
    metric_overwrite,
    no_grouping,
    no_shift,
    no_shuffle,
    no_step,
    orphan_params,
    pad_global,
    pad_loss,
    pad_pool,
    raw_inputs,
    resume_state,
    sampler_epoch,
    scheduler,
    shape_broadcast,
    softmax_ce,
    sync_reversed,
    target_grad,
    target_sync,
    train_mode,
    unscale_clip,
    untied,
    val_grad,
    val_leak,
    val_on_train,
    view_transpose,
    worker_seed,
    workers_respawn,
    zero_grad,
    zero_order,
)
from katas.catalogue import Bug, UnknownBug

BUGS: dict[str, Bug] = {
    module.BUG.id: module.BUG
    for module in (zero_grad, zero_order, no_step, leak, eval_mode, val_grad, train_mode, detach, scheduler, log0, softmax_ce,
                   functional_dropout, worker_seed, clip_order, metric_count, metric_overwrite, orphan_params, data_inplace,
                   shape_broadcast, no_shuffle, label_shift, frozen, raw_inputs, decay_norm, pad_loss, pad_pool, key_mask,
                   view_transpose, pad_global, no_grouping, accum_scale, accum_sched, unscale_clip, resume_state,
                   causal_mask, no_shift, untied, bptt_leak, ddp_set_epoch, ddp_no_sampler, ddp_metric, ddp_module,
                   ddp_save, ddp_rank_seed, lr_high, label_leak, val_leak, val_on_train, sampler_epoch, first_order, inner_inplace,
                   target_sync, sync_reversed, target_grad, detach_alias, workers_respawn)
}


def lookup(bug_id: str) -> Bug:
    try:
        return BUGS[bug_id]
    except KeyError:
        raise UnknownBug(bug_id, list(BUGS)) from None
