"""The probes, in report order; the health gate comes last.

The data flow: script → session (hooks → events, :mod:`checker.instrument` and
:mod:`checker.session`) → observers → record → judges → report. Each probe is one module with:

* ``ID``, ``TITLE`` and a module docstring stating its rule;
* ``SYMPTOM_ID`` and ``SYMPTOM``: the same check named by what is seen, never by
  its cause, for reports that must not give a kata's answer away (each
  ``Finding`` likewise carries ``observed`` next to its ``message``);
* ``Observation``: a dataclass of what it saw, JSON-safe, written into the
  signed record and read back field by field (a misspelt field is an error);
* ``Observer(session)``: runs inside the checked process, subscribes to the
  session's :class:`~checker.events.Event` stream and returns its ``Observation``
  from ``summary()``;
* ``judge(observation, facts) -> Finding``: runs in the ``kata`` process and
  decides from the observation and the run's :class:`~checker.facts.RunFacts` alone.

Optionally ``judge_ranks(observations, facts) -> Finding`` (the ranks of a process group compared; its
``judge`` then says what one process alone shows), ``ADVISES = True`` (advice at most, never a failure) and
``USES`` (the shared measurements whose errors are the probe's own). :class:`checker.probe.Probe` reads a
module's declaration once, checks it, and is what the session and the verdict work with.

Probe modules import torch only inside ``Observer`` code, so that the ``kata``
process, which only judges, never pays for importing it.
"""
from checker.probe import Probe
from checker.probes import (
    accum_mean,
    batch_independence,
    causality,
    clip_order,
    clip_units,
    decay_groups,
    divergence,
    epoch_order,
    eval_graphs,
    eval_mode,
    grad_check,
    gradient_flow,
    grads_accumulate,
    graph_span,
    graphs_retained,
    health,
    inner_steps,
    input_scale,
    label_alignment,
    label_leak,
    logit_input,
    loss_shapes,
    meta_gradient,
    lr_schedule,
    next_token,
    non_finite,
    pad_invariance,
    pad_targets,
    padding_waste,
    params_trained,
    rank_params,
    rank_shards,
    rank_streams,
    rank_writes,
    reported_metric,
    resume_state,
    target_grad,
    target_lag,
    tied_weights,
    train_mode,
    updates_applied,
    val_leak,
    worker_rng,
    workers_respawn,
)

MODULES = (
    grads_accumulate,
    graphs_retained,
    eval_mode,
    train_mode,
    gradient_flow,
    lr_schedule,
    non_finite,
    divergence,
    worker_rng,
    clip_order,
    logit_input,
    updates_applied,
    eval_graphs,
    loss_shapes,
    reported_metric,
    grad_check,
    params_trained,
    epoch_order,
    label_alignment,
    label_leak,
    val_leak,
    input_scale,
    decay_groups,
    pad_targets,
    pad_invariance,
    batch_independence,
    padding_waste,
    workers_respawn,
    accum_mean,
    clip_units,
    resume_state,
    causality,
    next_token,
    tied_weights,
    meta_gradient,
    inner_steps,
    target_lag,
    target_grad,
    graph_span,
    rank_params,
    rank_shards,
    rank_streams,
    rank_writes,
    health,
)
PROBES: tuple[Probe, ...] = tuple(Probe.of(module) for module in MODULES)
BY_ID: dict[str, Probe] = {probe.id: probe for probe in PROBES}
ADVISORY = frozenset(probe.id for probe in PROBES if probe.advises)  # advise, never fail
SHOWING_ADVICE = ADVISORY | {probe.id for probe in PROBES if probe.advice_shows}  # their advice is a symptom
