"""batch-independence: in eval mode, a sample's outputs do not depend on the other samples of its batch.

A reshape that swaps the batch and time dimensions (``h.view(T, B, H)`` where
``h.transpose(0, 1)`` was meant) has the right shape and mixes samples: each sequence
is fed pieces of its neighbours. Nothing raises; the model learns far less.

Rule. At the first update (or the end of the run), the probe takes the latest training
forward of a model that takes token ids (an integer ``(batch, time)`` argument, an
``nn.Embedding`` in the model), with at least two samples. A float32 copy of the model
in eval mode, no autocast, is run on that batch twice (every random stream, torch's,
Python's and NumPy's, seeded alike before each run: the two must agree bit for bit, or the
forward draws on something else and nothing is compared), then twice more: with the real
tokens of every sample but the first replaced by other token ids drawn from the batch
(padding positions kept; a fixed generator), and with those of the first sample replaced.
The first sample's outputs must not move in the first of these, nor the other samples'
outputs in the second (a causal model's first position ignores the rest of its sequence,
but its later positions read the first). Outputs compared: those with one entry per sample
along the dimension tested; an output that is zero wherever compared (a buffer the model
never fills) tells nothing and is skipped.

When the outputs move and the tokens have a second dimension, the same test is made along
it: tokens laid out time first, ``(time, batch)``, the default of ``nn.Transformer`` and of
the recurrent layers, have time as their first dimension, along which a sequence model
mixes by design. Outputs compared along the second dimension are those laid out like the
tokens (``(time, batch, ...)``) or with three dimensions or more (a state ``(layers, batch,
features)``), never a 2-D output that is as wide by chance (``(T * B, vocabulary)``). Where
the second dimension's entries are independent, they are the samples and that test is the
one judged; where both dimensions move, the first one's is reported.

* pass: they change by at most 1e-6 of their scale;
* fail: by more than 1e-3 of it;
* cannot tell in between, or when the copy cannot be run.

Measured (float32, CPU): every correct script with token ids changes by exactly 0 (the
text reference, the padding fixtures, the corpus token models). With the GRU fed
``h.view(T, B, H)`` (or ``out.view(B, T, H)`` back) instead of a transpose: 0.37 to 0.42
of the outputs' scale on the text reference, 0.21 to 0.49 with ``.contiguous().view``
(fixture), 0.89 on the corpus intent/slot model.

Why a correct script does not fail. In eval mode every standard layer computes each
sample from that sample alone (dropout off, batch-norm on its running statistics), so
changing other samples' tokens leaves sample 1's arithmetic bit for bit the same. A
model that normalises with batch statistics even in eval mode is not compared (cannot
tell). Padding positions are kept, so masks and lengths stay valid. A model fed ``(time, batch)`` tokens
moves along the first dimension (its positions attend to each other, or a recurrence carries them) and not along
the second; a reshape that mixes samples moves the outputs along both.

Not applicable when no training forward takes token ids, every batch seen holds one
sample, or no output has one row per sample (outputs flattened over time, tokens laid out
time first, as in a batchified language model). Cannot tell when the copy's forward fails or no output is per sample.

The check never disturbs the run: the copy runs with the RNG forked, autocast off, every
module hook and the session's events muted (as grad-check's copy). Cost: one deep copy
and four forwards of one batch once per run (eight when the second dimension is tested).

Not caught: a forward called as ``model.forward(x)`` skips the module's hooks, so only the
modules it calls are seen; a model whose weights start near zero can mix samples by less
than rounding at the first update (the probe's moment).
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "batch-independence"
TITLE = "samples of a batch do not influence each other"
SYMPTOM_ID, SYMPTOM = "neighbour-sensitivity", "one sample's outputs when the other samples of its batch change"

SAME = 1e-6  # relative change that passes
CHANGED = 1e-3  # ... above which the outputs depend on the other samples
SEED = 20240917


@dataclass
class Observation:
    model: str = ""  # "" when no training forward took token ids
    samples: int = 0  # samples in the copy's batch
    problem: str = ""
    change: float | None = None  # largest change of sample 1's outputs
    scale: float = 0.0  # largest magnitude of sample 1's outputs
    batch_dependent: str = ""
    per_sample: bool = True  # some output has one row per sample of the token input
    time_first: bool = False  # the tokens are laid out (time, batch): the samples compared along the second dimension


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

        reached = self.forwards.reached()
        chosen = next((f for f in reached if f.tokens.shape[0] >= 2), None)
        if chosen is None and not final and self.attempts < ATTEMPTS:
            return
        latest = next(iter(reached), None) or self.forwards.latest
        self.done = True
        if chosen is not None:
            self.obs = check(self.session, chosen)
        elif latest is not None:
            self.obs = Observation(model=type(latest.module).__name__, samples=int(latest.tokens.shape[0]))
        self.forwards.stop()

    def summary(self) -> Observation:
        if not self.done:
            self._try(final=True)
        return self.obs


def check(session, found) -> Observation:
    from checker.probes._shared.token_inputs import batch_dependent, float_copy, isolated, unwrap

    module = unwrap(found.module)
    n = int(found.tokens.shape[0])
    obs = Observation(model=type(found.module).__name__, samples=n)
    if type(module).__name__ == "OptimizedModule":
        obs.problem = "the model is compiled (torch.compile): an eager copy would not run the code that trained"
        return obs
    obs.batch_dependent = batch_dependent(module)
    if obs.batch_dependent:
        return obs
    with isolated(session, module):
        try:
            twin = float_copy(module)
        except Exception as exc:
            obs.problem = f"the model could not be copied ({type(exc).__name__}: {exc})"
            return obs
        try:
            compared = compare(twin, found, 0)
            if (compared is None or changed(*compared)) and found.tokens.dim() >= 2 and found.tokens.shape[1] >= 2:
                # Tokens laid out time first ((T, B), nn.Transformer's and nn.LSTM's default): the first dimension
                # is time, along which a sequence model mixes by design; the samples are the second one.
                across = compare(twin, found, 1)
                if across is not None and (compared is None or not changed(*across)):
                    compared, obs.samples, obs.time_first = across, int(found.tokens.shape[1]), True
        except Unsteady as exc:
            obs.problem = str(exc)
            return obs
        except Exception as exc:
            obs.problem = f"the model's forward failed on the copy ({type(exc).__name__}: {exc})"
            return obs
    if compared is None:
        obs.per_sample = False
        return obs
    change, scale = compared
    if change is None:
        obs.problem = "an output of the copy is not finite"
        return obs
    obs.change, obs.scale = change, scale
    return obs


class Unsteady(Exception):
    """The copy's forward does not repeat itself on the same input: no comparison can be trusted."""


def compare(twin, found, dim: int) -> tuple[float | None, float] | None:
    """Whether the entries along ``dim`` are independent samples: the copy run on the batch, then with the real tokens
    of every entry but the first replaced (the first entry's outputs must not move), then with those of the first
    replaced (the others' outputs must not move: a causal model's later positions do). Returns the larger change,
    relative to its outputs' magnitude, as (change, magnitude); change None when an output is not finite; None when
    no output has one entry per sample along ``dim``, or every such output is zero wherever it is compared."""
    import torch

    from checker.probes._shared.replay import seed_all
    from checker.probes._shared.token_inputs import convert, float_outputs

    tokens = found.tokens.detach()
    n = int(tokens.shape[dim])
    real = tokens != found.pad if found.pad is not None else torch.ones_like(tokens, dtype=torch.bool)
    pool = torch.unique(tokens[tokens != found.pad] if found.pad is not None else tokens)
    generator = torch.Generator().manual_seed(SEED)
    drawn = pool.cpu()[torch.randint(len(pool), tuple(tokens.shape), generator=generator)].to(tokens.device)
    first = torch.zeros_like(real)
    first.select(dim, 0).fill_(True)

    def run(replacement):
        def same(t):
            if t is found.tokens:
                return replacement
            t = t.detach()
            return t.float() if t.is_floating_point() else t

        seed_all(0)
        out = twin(*convert(found.args, same), **convert(found.kwargs, same))
        # along the second dimension, an output laid out like the tokens ((time, batch, ...)) or a state with the
        # batch second ((layers, batch, features)); not a 2-D output that is as wide by chance ((T * B, vocabulary))
        return [t for t in float_outputs(out) if t.dim() > dim and t.shape[dim] == n
                and (dim == 0 or t.dim() >= 3 or t.shape[0] == tokens.shape[0])]

    base = run(tokens)
    if not base:
        return None
    again = run(tokens)
    if any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(base, again)):
        raise Unsteady("the copy's outputs differ between two runs on the same batch, with every random stream "
                       "seeded alike: its forward draws on something else (the clock, a stream of its own)")
    worst = None
    head, rest = torch.tensor([0]), torch.arange(1, n)  # the first entry along ``dim``, and the others
    for kept, replaced in ((head, real & ~first), (rest, real & first)):
        for a, b in zip(base, run(torch.where(replaced, drawn, tokens))):
            if a.shape != b.shape:
                continue
            a, b = a.index_select(dim, kept.to(a.device)), b.index_select(dim, kept.to(b.device))
            if not (bool(a.isfinite().all()) and bool(b.isfinite().all())):
                return None, 0.0
            scale = float(a.abs().max()) if a.numel() else 0.0
            if scale == 0.0:  # zero wherever compared (a buffer the model never fills): it tells nothing
                continue
            change = float((a - b).abs().max())
            if worst is None or change / scale > worst[0] / worst[1]:
                worst = (change, scale)
    return worst


def changed(change: float | None, scale: float) -> bool:
    """Whether a comparison found outputs that moved beyond rounding (or could not be read)."""
    return change is None or change > SAME * scale


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.model:
        why = "no training forward took token ids"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.batch_dependent:
        why = f"{obs.model} was not compared: {obs.batch_dependent}"
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    if obs.samples < 2:
        why = f"every batch {obs.model} was trained on held one sample: there are no neighbours to compare"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if not obs.per_sample:
        why = (f"no output of {obs.model} has one row per sample of its token input (outputs flattened over time, "
               "or tokens laid out time first): samples cannot be told apart")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.problem or obs.change is None:
        why = f"{obs.model} was not compared: {obs.problem or 'nothing was compared'}"
        return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
    relative = obs.change / obs.scale if obs.scale > 0 else (0.0 if obs.change == 0 else float("inf"))
    layout = " (tokens laid out time first: the samples along the second dimension)" if obs.time_first else ""
    where = (f"on a float32 eval copy of {obs.model}, {obs.samples} samples{layout}, the other samples' tokens "
             f"replaced: the first sample's outputs changed by {obs.change:.2g} (outputs up to {obs.scale:.2g})")
    measured, threshold = f"{relative:.2g}", f"≤ {SAME:.0e}"
    if relative <= SAME:
        return Finding(ID, TITLE, PASS, measured, threshold, where,
                       observed=f"a sample's outputs do not change when the rest of its batch changes "
                                f"({relative:.1e} of their size)")
    observed = (f"a sample's outputs change when the other samples of its batch change: by {obs.change:.2g} "
                f"({relative:.2g} of their size)")
    if relative <= CHANGED:
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                       f"{where}: more than rounding explains, too little to be sure", observed=observed)
    return Finding(ID, TITLE, FAIL, measured, threshold,
                   f"{where}. Samples are mixed inside the model: a reshape (`view`) where the batch and time "
                   "dimensions had to be swapped (`transpose`), or an operation across the batch dimension",
                   observed=observed)
