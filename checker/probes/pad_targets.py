"""pad-targets: a per-token loss sends no gradient to padded positions.

A per-token loss (a tagger's, a language model's, an auxiliary token head's) computed on
a padded batch must leave the padded positions out: ``ignore_index=PAD``, or a masked
mean. Without it the model is trained to predict padding, which is most of what short
sequences hold, and the loss is averaged over a count that depends on the batch's
longest sequence.

Rule. For the first 4 training calls of a loss function of ``torch.nn.functional``
(``nn.CrossEntropyLoss`` and friends call them) whose integer target is aligned with the
token ids of the latest training forward (as many targets as tokens, or the tokens'
shape) and whose input requires grad, while the padding id of those tokens is known (see
:mod:`checker.probes._shared.token_inputs`; here also the value that only ever ends the rows, in runs
of different lengths: right padding with no ``padding_idx``, as the seq2seq tutorial pads its
batches): the gradient that reaches the loss's input is
captured, row by row, one row per position. Padded positions are those whose token is
the padding id.

* pass: the largest gradient on a padded position's row is at most 1e-6 of the largest
  on a real token's row (exactly 0 with ``ignore_index`` or a multiplicative mask);
* fail: it is above 1e-3 of it at some call;
* cannot tell in between, or when no real position received a gradient.

Measured: 0 on the text reference (``ignore_index``), the corpus intent/slot model
(``ignore_index``) and the masked-mean fixture (``reduction='none'`` times the mask);
without ``ignore_index``: 1.0 (text reference), 0.96 (corpus); the mask "scale the loss
by the fraction of real tokens": 0.90 to 0.94 (it rescales, it does not exclude).

Why a correct script does not fail. Every correct way of leaving positions out of a
loss (``ignore_index``, a target the loss ignores, ``reduction='none'`` times a 0/1
mask, selecting the real positions before the loss) gives those rows a gradient of
exactly zero. Losses not aligned with the tokens (a per-sample classification loss, a
shifted language-model target of another length) are not looked at.

Not applicable when no training forward takes token ids, their padding id is unknown,
or no loss is aligned with them on a batch that holds padding.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "pad-targets"
TITLE = "padded positions get no gradient from the loss"
SYMPTOM_ID, SYMPTOM = "pad-gradient", "the per-token loss's gradient at padded positions"

ZERO = 1e-6  # largest padded-row gradient, relative to the real rows', that passes
NONZERO = 1e-3  # ... above which padded positions are trained
CALLS = 4  # loss calls checked


@dataclass
class Observation:
    model: str = ""  # "" when no training forward took token ids
    pad: int | None = None
    pad_source: str = ""
    kinds: list[str] = field(default_factory=list)  # loss functions checked
    ratios: list[float] = field(default_factory=list)  # per call: max |grad| on padded rows / on real rows
    padded: list[int] = field(default_factory=list)  # per call: padded positions
    positions: list[int] = field(default_factory=list)  # per call: positions
    target_is_pad: list[bool] = field(default_factory=list)  # per call: the padded positions' targets are the pad id
    unreached: int = 0  # calls checked whose real rows got no gradient


class Observer:
    def __init__(self, session):
        from checker.probes._shared.token_inputs import TokenForwards

        self.session = session
        self.forwards = TokenForwards(session, ID)
        self.obs = Observation()
        self.calls = 0
        session.on(Event.FORWARD, ID, self.forwards.on_forward)
        session.on(Event.LOSS, ID, self.on_loss)

    def on_loss(self, call) -> None:
        import torch

        from checker.probes._shared.token_inputs import TRAILING, trailing_pad

        found = self.forwards.latest
        if found is None or self.calls >= CALLS:
            return
        pad, source = found.pad, found.source
        if pad is None and (trailing := trailing_pad(found.tokens)) is not None:
            pad, source = trailing, TRAILING
        if not self.obs.model or self.obs.pad is None and pad is not None:
            self.obs.model, self.obs.pad, self.obs.pad_source = type(found.module).__name__, pad, source
        inp, target = call.input, call.target
        if pad is None or not isinstance(inp, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        if not inp.requires_grad or target.is_floating_point() or target.dtype == torch.bool:
            return
        tokens = found.tokens
        n = tokens.numel()
        if target.numel() != n:
            return
        if inp.dim() == 2 and inp.shape[0] == n:
            rows = None  # one row per position already
        elif inp.dim() == 3 and target.dim() == 2 and tuple(target.shape) == (inp.shape[0], inp.shape[2]):
            rows = "class-second"
        else:
            return
        padded = (tokens == pad).reshape(-1).to(inp.device)
        if not bool(padded.any()) or bool(padded.all()):
            return
        self.calls += 1
        target_is_pad = bool((target.reshape(-1).to(padded.device)[padded] == pad).all())
        obs = self.obs

        def seen(grad) -> None:
            g = grad.detach()
            if rows == "class-second":
                g = g.transpose(1, 2)
            g = g.reshape(n, -1).float().abs().amax(dim=1)
            on_pad, on_real = float(g[padded].max()), float(g[~padded].max())
            if on_real == 0 or not (on_real < float("inf")):
                obs.unreached += 1
                return
            obs.kinds.append(call.kind)
            obs.ratios.append(on_pad / on_real)
            obs.padded.append(int(padded.sum()))
            obs.positions.append(n)
            obs.target_is_pad.append(target_is_pad)

        inp.register_hook(seen)
        if self.calls >= CALLS:
            self.forwards.stop()

    def summary(self) -> Observation:
        if self.calls < CALLS:
            self.forwards.stop()
        return self.obs


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.model:
        why = "no training forward took token ids: nothing is padded"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if obs.pad is None:
        why = f"{obs.model} takes token ids, but {obs.pad_source or 'their padding id is unknown'}"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    if not obs.ratios:
        if obs.unreached:
            why = "the per-token loss's gradient reached no real position: nothing to compare the padded ones with"
            return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
        why = (f"no training loss was computed per token on a padded batch of {obs.model} (padding id {obs.pad}, "
               f"from {obs.pad_source})")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    worst = max(obs.ratios)
    kinds = ", ".join(dict.fromkeys(obs.kinds))
    where = (f"at {len(obs.ratios)} training calls of {kinds} with one target per token (padding id {obs.pad}, from "
             f"{obs.pad_source}; {obs.padded[0]} of {obs.positions[0]} positions padded in the first)")
    figures = ", ".join(f"{r:.2g}" for r in obs.ratios)
    measured = f"{worst:.2g}"
    if worst <= ZERO:
        return Finding(ID, TITLE, PASS, measured, f"≤ {ZERO:.0e}",
                       f"{where}, padded positions received no gradient (largest, relative to real tokens': {figures})",
                       series={"padded / real gradient, per call": obs.ratios},
                       observed=f"padded positions received no gradient from the per-token loss ({worst:.1e})")
    observed = (f"padded positions received a gradient from the per-token loss, up to {worst:.2g} times the largest "
                "on a real token")
    if worst <= NONZERO:
        return Finding(ID, TITLE, CANNOT_TELL, measured, f"≤ {ZERO:.0e}",
                       f"{where}: padded rows received {figures} of the real rows' gradient, too little to be sure",
                       observed=observed)
    targets = " (their targets are the padding id itself)" if all(obs.target_is_pad) else ""
    return Finding(ID, TITLE, FAIL, measured, f"≤ {ZERO:.0e}",
                   f"{where}, padded positions{targets} received {figures} of the largest gradient on a real token: "
                   "the loss trains the model to predict padding. Leave them out (`ignore_index=` the padding id, or "
                   "a masked mean over real tokens)", series={"padded / real gradient, per call": obs.ratios},
                   observed=observed)
