"""input-scale: what the first layer of a trained model receives is on a unit scale, not in raw units.

What is observed. For the first ``FORWARDS`` top-level forwards run with autograd
on, the first module of that forward to run that either has parameters of its own
or is a normalisation layer (``BatchNorm``, ``LayerNorm``, ``GroupNorm``,
``InstanceNorm``, ``LocalResponseNorm``, ``RMSNorm``): the *first layer*, whatever functional
preprocessing ran before it (``x / 255`` inside ``forward``). Its first positional
argument is read: a floating-point tensor gives its root mean square over the
whole batch (one reduction and one host sync per forward); an integer tensor
(token ids into an ``Embedding``) or anything else is noted as such. The next module
of the same forward that has parameters or normalises is noted too, and whether its
input is the very tensor the first layer returned (a global forward hook keeps a weak
reference to that output): a ``Conv2d`` straight into a ``BatchNorm2d``, a
``Linear`` straight into a ``LayerNorm``. The probe's own module hooks are then
removed: the rest of the run pays nothing. A compiled
model runs no hooks inside: its own input is read, for the first such module it
registers. Only the
forwards the run later shows to be training (a backward pass reached their
output, :meth:`checker.session.Session.phase`) are judged, model by model (the
top-level module: a GAN's generator and discriminator apart).

Rule. A model *fails* when its first layer is not a normalisation layer, received
floating-point inputs, and the median of their RMS over its judged forwards is
above ``THRESHOLD`` = 8, unless that layer's output went straight into a
normalisation layer in every judged forward: then it *advises*. A normalisation
by batch statistics undoes any scale and any offset of what feeds it, forward and
backward (its gradient sums to zero over the batch): 0–255 pixels into a ResNet
stem (a bias-free convolution, then batch-norm) train exactly as pixels in [0, 1]
do, so the run shows no harm, only the practice (augmentation noise, weight decay
and a later change of the architecture still assume unit-scale inputs). Measured: the classifier reference's standardised
readings ≈ 1.0 (raw, about 100 ± 40: ≈ 108; divided by 10 only: ≈ 11); images
in [0, 1] ≈ 0.5, normalised images ≈ 1, 0–255 pixels ≈ 120; Gaussian noise for a
generator ≈ 1; unstandardised but modest features (heavy-tailed columns of a
tabular script) ≈ 2. A factor of 8 above unit scale multiplies the first layer's
pre-activations and its weight gradients by as much as the initialisation, which
assumes unit-scale inputs, never expects. The probe fails when a model fails; it
passes when every judged model's first layer got inputs at or below the threshold,
or is a normalisation layer (it standardises what it gets, by batch or by sample:
pass, with the reason); cannot tell when the first layer's input was never a
tensor; n/a when no training forward was seen, or every judged first layer got
integer inputs (token ids) or a tensor whose values are not features to measure
(sparse, nested, complex, quantized).

Why a correct script does not fail. Standardised features, images in [0, 1] or
normalised, embeddings, noise and the outputs of a frozen (no-grad) extractor are
all within a factor 8 of unit scale; only the first layer is looked at, never
activations deeper in the model (a transformer's scaled embeddings, a residual
stream). A first layer that normalises its input itself makes raw units harmless,
and passes; one whose output is normalised straight after gets advice, not a
failure. Not caught: inputs too small (0–1 pixels divided by 255 twice), features
on very different scales whose overall RMS is modest, and models trained without
autograd.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.probes._shared.layers import NORM_LAYERS, first_layer

ID = "input-scale"
TITLE = "inputs are on a unit scale"
SYMPTOM_ID, SYMPTOM = "first-layer-input", "scale of the first layer's inputs"
FORWARDS = 16  # top-level forwards with autograd on whose first layer is measured
THRESHOLD = 8.0  # RMS of the first layer's input above which a model fails
FLOAT, INTEGER, NORMALISING, UNREAD, OTHER = "float", "integer", "normalising", "unread", "other"
ADVICE_SHOWS = True  # its advice (raw units into a layer normalised straight after) is the raw-inputs bug's symptom


@dataclass
class Observation:
    # per trained model: {"model", "layer" (its first layer's class), "kind" (float, integer, normalising, other),
    # "rms" (per judged forward, float inputs only), "forwards", "normalised" (the normalisation layer that took the
    # first layer's output straight, in every judged forward; "" if not in one)}
    models: list[dict] = field(default_factory=list)
    measured: int = 0  # forwards measured, training or not


class Observer:
    def __init__(self, session):
        self.session = session
        self.samples: list[dict] = []
        self._looking = False
        self._top: tuple[int, int, str] = (0, 0, "")  # the top-level forward running now: index, id(), class name
        self._first = None  # (the first layer, its sample) while its output's taker is awaited
        self._output = None  # a weak reference to the first layer's output
        self._handle = session.patches.forward_pre_hook(ID, self._before)
        self._after_handle = session.patches.forward_hook(ID, self._after)

    def _after(self, module, args, output) -> None:
        if self._first is not None and module is self._first[0] and self._output is None:
            import torch

            if isinstance(output, torch.Tensor):
                self._output = weakref.ref(output)

    def _taken(self, args, name: str) -> None:
        """The module after the first layer: is it a normalisation layer fed that layer's very output?"""
        sample = self._first[1]
        output = self._output() if self._output is not None else None
        straight = output is not None and bool(args) and args[0] is output and name in NORM_LAYERS
        sample["normalised"] = name if straight else ""
        self._first, self._output = None, None

    def _stop(self) -> None:
        self.session.patches.remove(self._handle)
        self.session.patches.remove(self._after_handle)

    def _before(self, module, args) -> None:
        import torch
        from torch import nn

        from checker import tensors
        from checker.tensors import observable

        if not observable():  # traced by torch.compile, or recomputed inside a backward pass
            return
        if self.session.forward is None:  # a top-level call: a forward starts, unless it is a loss
            self._first, self._output = None, None
            if len(self.samples) >= FORWARDS:
                self._stop()
                return
            self._looking = torch.is_grad_enabled() and not isinstance(module, nn.modules.loss._Loss)
            self._top = (len(self.session.forwards), id(module), type(module).__name__)
        if not self._looking and self._first is None:
            return
        layer = first_layer(module._orig_mod) if type(module).__name__ == "OptimizedModule" else module
        name = type(layer).__name__ if layer is not None else ""
        if layer is None or name not in NORM_LAYERS and not any(p is not None for p in layer._parameters.values()):
            return
        if self._first is not None:
            self._taken(args, name)
            return
        self._looking = False
        index, model, model_name = self._top
        sample = {"forward": index, "model": model, "name": model_name, "layer": name, "kind": OTHER, "rms": None,
                  "normalised": ""}
        x = args[0] if args else None
        if name in NORM_LAYERS:
            sample["kind"] = NORMALISING
        elif isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() and tensors.plain(x):
            rms = float(torch.linalg.vector_norm(x.detach().float()) / math.sqrt(x.numel()))
            sample.update(kind=FLOAT, rms=rms if math.isfinite(rms) else None)
        elif isinstance(x, torch.Tensor) and not x.is_floating_point() and not x.is_complex() and tensors.plain(x):
            sample["kind"] = INTEGER
        elif isinstance(x, torch.Tensor):  # sparse, nested, complex, quantized, meta, a wrapper: not features to measure
            sample["kind"] = UNREAD
        self.samples.append(sample)
        if sample["kind"] == FLOAT and type(module).__name__ != "OptimizedModule":
            self._first = (layer, sample)

    def summary(self) -> Observation:
        self._stop()
        forwards = self.session.forwards
        models: dict[int, dict] = {}
        for s in self.samples:
            if s["forward"] >= len(forwards) or self.session.phase(forwards[s["forward"]]) != "train":
                continue
            row = models.setdefault(s["model"], {"model": s["name"], "layer": s["layer"], "kind": s["kind"], "rms": [],
                                                 "forwards": 0, "normalised": s["normalised"]})
            row["forwards"] += 1
            if row["normalised"] != s["normalised"]:
                row["normalised"] = ""  # normalised straight after in every judged forward, or not at all
            if s["kind"] == FLOAT and s["rms"] is not None:
                row["rms"].append(s["rms"])
        return Observation(list(models.values()), len(self.samples))


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _seen(row: dict) -> str:
    return (f"the first layer of {row['model']} ({row['layer']}) received inputs with an RMS of "
            f"{median(row['rms']):.3g} (median of {len(row['rms'])} training forwards)")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.models:
        why = "no training forward was seen (none with autograd on whose output a backward pass reached)"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    floats = [row for row in obs.models if row["kind"] == FLOAT and row["rms"]]
    failing = [row for row in floats if median(row["rms"]) > THRESHOLD]
    harmful = [row for row in failing if not row.get("normalised")]
    if failing and not harmful:
        worst = max(failing, key=lambda row: median(row["rms"]))
        seen = _seen(worst)
        message = (f"{seen}, more than {THRESHOLD:g} times unit scale: the inputs are in raw units. Its output goes "
                   f"straight into {worst['normalised']}, which undoes their scale and offset, so this run shows no "
                   "harm from them; standardising the inputs with statistics of the training set is still the usual "
                   "practice (augmentation noise, weight decay and a change of architecture assume unit scale)")
        return Finding(ID, TITLE, ADVICE, f"RMS {median(worst['rms']):.3g}", f"≤ {THRESHOLD:g}", message,
                       observed=seen)
    if failing:
        worst = max(harmful, key=lambda row: median(row["rms"]))
        seen = _seen(worst)
        message = (f"{seen}, more than {THRESHOLD:g} times unit scale: the inputs are in raw units. The layer's "
                   "initialisation assumes inputs of about unit scale, so its pre-activations and weight gradients "
                   "are inflated by as much; standardise the inputs with statistics of the training set (or scale "
                   "them into [0, 1]), the same way for training and validation")
        return Finding(ID, TITLE, FAIL, f"RMS {median(worst['rms']):.3g}", f"≤ {THRESHOLD:g}", message, observed=seen)
    normalising = [row for row in obs.models if row["kind"] == NORMALISING]
    if floats or normalising:
        parts = [f"{row['model']}: {row['layer']} got inputs of RMS {median(row['rms']):.3g}" for row in floats]
        seen = [f"{row['model']}: its first layer got inputs of RMS {median(row['rms']):.3g}" for row in floats]
        parts += [f"{row['model']}: its first layer, {row['layer']}, normalises its inputs itself" for row in normalising]
        seen += [f"{row['model']}: its first layer normalises its inputs itself" for row in normalising]
        measured = f"RMS {max(median(row['rms']) for row in floats):.3g}" if floats else "normalised by the layer"
        return Finding(ID, TITLE, PASS, measured, f"≤ {THRESHOLD:g}", "; ".join(parts), observed="; ".join(seen))
    if any(row["kind"] == INTEGER for row in obs.models):
        why = "the first layer of every trained model received integer inputs (token ids into an embedding)"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    if any(row["kind"] == UNREAD for row in obs.models):
        why = ("the first layer of every trained model received a tensor whose values are not read as features "
               "(sparse, nested, complex or quantized)")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"not judged: {why}", observed=why)
    why = "the first layer's input was not a tensor (a packed sequence, a structure) in any training forward"
    return Finding(ID, TITLE, CANNOT_TELL, message=why, observed=why)
