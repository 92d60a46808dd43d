"""pad-invariance: a sample's outputs do not depend on how much padding follows it.

Padding is an artefact of batching: a sequence of 7 tokens padded to 24 is still that
sequence. A model that averages over padded positions, lets attention look at them, or
reads its summary at the last (padded) time step gives a sample a different answer
depending on its neighbours' lengths; training still runs, accuracy just suffers.

Rule. At the first update (or the end of the run), the probe takes the latest training
forward of a model that takes token ids (an integer ``(batch, time)`` argument, an
``nn.Embedding`` in the model) whose padding id is known (see
:mod:`checker.probes._shared.token_inputs`) and in which some sample ends in padding. For up to
two such samples (the most padded first), a float32 copy of the model in eval mode, no
autocast, is run twice on that sample alone: once exactly as it was in the batch
(its row of every argument whose leading dimension is the batch's), once trimmed to its
real tokens (every argument's time dimension cut at its last non-padding token). Outputs
are compared where both have them: whole when their shapes agree, else along the time
dimension up to the real length.

* pass: the largest change of any output is at most 1e-5;
* fail: it exceeds 1e-4 (times the outputs' scale when above 1), 500 times the largest change measured on
  a correct script;
* cannot tell in between, or when the copy cannot be run.

Measured (float32, CPU): every correct script with token ids and a known padding id changes
by at most 1.8e-7 (the text reference; its fixtures' packed GRU, masked attention and
masked mean 0 to 9e-8; the corpus intent/slot model and token transformer 0 and 3e-8).
With masked pooling replaced by a plain mean over time: 0.1 (text reference), 0.016
(the corpus model, whose batches are grouped by length: 9 real tokens padded to 12),
0.12 to 0.19 (fixture: padded states zeroed but divided by the padded length); the
encoder without its key padding mask: 0.023 to 0.03 (text reference), 0.06 (fixture:
attention over zeroed padding embeddings), 7e-4 to 9e-4 (the corpus token transformer, whose
embeddings are scaled by sqrt(d_model) while padded positions hold only their positional encoding).

Why a correct script does not fail. With padding handled (masks in attention and
pooling, packed or length-aware recurrences, losses that ignore padded targets), the
real positions of a sample compute exactly the same function of exactly the same tokens
in both runs; only float rounding in products of different lengths differs (1e-7 in
float32). The copy runs in float32 without autocast and, on CUDA, without TF32, so
reduced-precision noise of the script's own forward does not count; in eval mode, so dropout is off; on one sample, so batch
statistics cannot enter (a model normalising with batch statistics even in eval is not
compared: cannot tell). Padding at the start (left padding) is not trimmed: such a sample
is not used.

Not applicable when no training forward takes token ids, or their padding id cannot be
found. Cannot tell when no sample ends in padding in the batches seen, when the copy's
forward fails, or when no output of the two runs can be compared.

The check never disturbs the run: the copy runs with the RNG forked, autocast off, every
module hook and the session's events muted (as grad-check's copy); the model, its modes,
the optimizer and the script's random streams are untouched. Cost: one deep copy and
four forwards of one sample, once per run; until then one call per top-level forward.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "pad-invariance"
TITLE = "padding does not change a sample's outputs"
SYMPTOM_ID, SYMPTOM = "pad-sensitivity", "a sample's outputs with and without trailing padding"

SAME = 1e-5  # largest change of an output that passes
CHANGED = 1e-4  # ... above which (times the outputs' scale when above 1) the sample's outputs changed
SAMPLES = 2


@dataclass
class Observation:
    model: str = ""  # class name of the model checked; "" when no training forward took token ids
    pad: int | None = None
    pad_source: str = ""
    problem: str = ""  # why the comparison could not run
    samples: list[list[int]] = field(default_factory=list)  # [real length, padded length] per sample compared
    changes: list[float] = field(default_factory=list)  # largest change of any output, per sample
    scale: float = 0.0  # largest output magnitude
    batch_dependent: str = ""


class Observer:
    def __init__(self, session):
        from checker.probes._shared.token_inputs import TokenForwards

        self.session = session
        self.forwards = TokenForwards(session, ID)
        self.obs = Observation()
        self.done = False
        self.attempts = 0
        session.on(Event.FORWARD, ID, self.forwards.on_forward)
        session.on(Event.UPDATE_PRE, ID, self.on_update)

    def on_update(self, update) -> None:
        if self.done or self.session.forward is not None:
            return
        self.attempts += 1
        self._try(final=False)

    def _try(self, final: bool) -> None:
        from checker.probes._shared.token_inputs import ATTEMPTS

        candidates = [f for f in self.forwards.reached() if f.pad is not None]
        chosen = next((f for f in candidates if padded_rows(f)), None)
        if chosen is None and not final and self.attempts < ATTEMPTS:
            return
        latest = next(iter(self.forwards.reached()), None) or self.forwards.latest
        self.done = True
        if chosen is not None:
            self.obs = check(self.session, chosen)
        elif latest is not None:
            self.obs = Observation(model=type(latest.module).__name__, pad=latest.pad, pad_source=latest.source)
            if latest.pad is None:
                self.obs.problem = latest.source
            else:
                self.obs.problem = "no sample of the batches seen ends in padding"
        self.forwards.stop()

    def summary(self) -> Observation:
        if not self.done:
            self._try(final=True)
        return self.obs


def real_lengths(tokens, pad: int):
    """Per sample, the position after its last non-padding token."""
    import torch

    positions = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)
    return ((tokens != pad) * positions).amax(dim=1)


def padded_rows(found) -> list[int]:
    """Samples that end in padding and hold at least one real token, the most padded first (at most SAMPLES)."""
    lengths = real_lengths(found.tokens, found.pad).tolist()
    t = found.tokens.shape[1]
    rows = sorted((i for i, n in enumerate(lengths) if 1 <= n < t), key=lambda i: (lengths[i], i))
    return rows[:SAMPLES]


def check(session, found) -> Observation:
    from checker.probes._shared.token_inputs import batch_dependent, float_copy, isolated, unwrap

    module = unwrap(found.module)
    obs = Observation(model=type(found.module).__name__, pad=found.pad, pad_source=found.source)
    if type(module).__name__ == "OptimizedModule":
        obs.problem = "the model is compiled (torch.compile): an eager copy would not run the code that trained"
        return obs
    obs.batch_dependent = batch_dependent(module)
    if obs.batch_dependent:
        return obs
    rows = padded_rows(found)
    lengths = real_lengths(found.tokens, found.pad).tolist()
    with isolated(session, module):
        try:
            twin = float_copy(module)
        except Exception as exc:
            obs.problem = f"the model could not be copied ({type(exc).__name__}: {exc})"
            return obs
        try:
            for row in rows:
                change, scale = compare(twin, found, row, lengths[row])
                if change is None:
                    obs.problem = "no output of the sample alone could be compared with and without its padding"
                    return obs
                obs.samples.append([lengths[row], int(found.tokens.shape[1])])
                obs.changes.append(change)
                obs.scale = max(obs.scale, scale)
        except Exception as exc:
            obs.problem = f"the model's forward failed on the copy ({type(exc).__name__}: {exc})"
    return obs


def compare(twin, found, row: int, length: int) -> tuple[float | None, float]:
    """The largest change of the sample's outputs between its padded row and the row trimmed to its real tokens."""
    import torch

    from checker.probes._shared.token_inputs import convert, float_outputs

    batch, time = found.tokens.shape

    def cut(t, keep: int):
        t = t.detach()
        if t.dim() == 0 or t.shape[0] != batch:
            sized = [d for d in range(t.dim()) if t.shape[d] == batch]
            if len(sized) == 1:  # a recurrent state (layers, batch, features)
                t = t.narrow(sized[0], row, 1)
            return t.float() if t.is_floating_point() else t
        t = t[row:row + 1]
        if keep < time:
            dims = [1] if t.is_floating_point() else range(1, t.dim())
            for d in dims:
                if d < t.dim() and t.shape[d] == time:
                    t = t.narrow(d, 0, keep)
        return t.float() if t.is_floating_point() else t

    from checker.probes._shared.replay import seed_all

    outputs = []
    for keep in (time, length):
        seed_all(0)
        args = convert(found.args, lambda t: cut(t, keep))
        kwargs = convert(found.kwargs, lambda t: cut(t, keep))
        outputs.append(float_outputs(twin(*args, **kwargs)))
    change, scale, compared = 0.0, 0.0, 0
    for padded, trimmed in zip(*outputs):
        if padded.shape != trimmed.shape:
            dims = [d for d in range(padded.dim()) if padded.shape[d] != trimmed.shape[d]]
            if len(dims) != 1 or padded.dim() != trimmed.dim() or padded.shape[dims[0]] != time \
                    or trimmed.shape[dims[0]] != length:
                continue
            padded = padded.narrow(dims[0], 0, length)
        if padded.numel() == 0:
            continue
        if not (bool(padded.isfinite().all()) and bool(trimmed.isfinite().all())):
            raise FloatingPointError("an output of the copy is not finite")
        compared += 1
        change = max(change, float((padded - trimmed).abs().max()))
        scale = max(scale, float(padded.abs().max()))
    return (change if compared else None), scale


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.model:
        why = "no training forward took token ids: nothing is padded"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.pad is None:
        why = f"{obs.model} takes token ids, but {obs.problem or 'their padding id is unknown'}"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.batch_dependent:
        why = f"{obs.model} was not compared: {obs.batch_dependent}"
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    if obs.problem or not obs.changes:
        why = f"{obs.model} was not compared: {obs.problem or 'no sample was compared'}"
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    worst = max(obs.changes)
    figures = ", ".join(f"{c:.2g} ({n} real tokens padded to {t})" for c, (n, t) in zip(obs.changes, obs.samples))
    where = (f"on a float32 eval copy of {obs.model}, each sample alone, as padded in its batch and trimmed to its "
             f"real tokens (padding id {obs.pad}, from {obs.pad_source})")
    measured = f"{worst:.2g}"
    if worst <= SAME:
        return Finding(ID, TITLE, PASS, measured, f"≤ {SAME:.0e}", f"{where}, the outputs agree: {figures}",
                       observed=f"a sample's outputs do not change when padding follows it (at most {worst:.1e})")
    observed = (f"the same sample gets different outputs depending on how much padding follows it: up to {worst:.2g} "
                f"(outputs up to {obs.scale:.2g} in size)")
    if worst <= CHANGED * max(1.0, obs.scale):
        why = f"{where}, the outputs differ by {figures}: more than rounding explains, too little to be sure"
        return Finding(ID, TITLE, CANNOT_TELL, measured, f"≤ {SAME:.0e}", why, observed=observed)
    return Finding(ID, TITLE, FAIL, measured, f"≤ {SAME:.0e}",
                   f"{where}, the outputs change by {figures}. Padded positions take part in the computation: an "
                   "average over time that counts them, attention without a key padding mask, or a summary read at a "
                   "padded time step", observed=observed)
