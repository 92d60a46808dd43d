"""Measurements several probes share, so that no probe reaches into another.

Each is a named helper module, not a probe: it is never in the report. A measurement that observes the run
(``lm_trace.Trace``) is made once per session through ``session.shared(kind)`` and subscribes under its own
owner name; the probes that read it list that name in ``USES``, so its errors are theirs.
``token_inputs`` (the token forwards the padding and batch probes replay), ``mode_ledger`` (which forwards ran
dropout or batch norm in which mode), ``replay`` (running a copy of the model quietly, on a forked random
state) and ``layers`` (which module is a model's first layer) are plain helpers.
"""
