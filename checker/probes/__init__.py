"""The probes, in report order; the health gate comes last.

Each probe is one module with:

* ``ID``, ``TITLE`` and a module docstring stating its rule;
* ``Observer(session)``: runs inside the checked process, subscribes to the
  session's events and returns a JSON-safe ``summary()``;
* ``judge(observation, facts) -> Finding``: runs in the ``kata`` process and
  decides from that summary alone.

Probe modules import torch only inside ``Observer`` code, so that the ``kata``
process, which only judges, never pays for importing it.
"""
from checker.probes import (
    clip_order,
    eval_mode,
    gradient_flow,
    grads_accumulate,
    graphs_retained,
    health,
    lr_schedule,
    non_finite,
    train_mode,
    worker_rng,
)

PROBES = (
    grads_accumulate,
    graphs_retained,
    eval_mode,
    train_mode,
    gradient_flow,
    lr_schedule,
    non_finite,
    worker_rng,
    clip_order,
    health,
)
BY_ID = {probe.ID: probe for probe in PROBES}
