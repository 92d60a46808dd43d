"""tied-weights: an output layer tied to the embedding is the embedding's parameter, not a copy of it.

Weight tying (``self.head.weight = self.emb.weight``) makes one matrix read tokens in and score them out. A
copy (``nn.Parameter(self.emb.weight.clone())``, ``.data.copy_``, a ``load_state_dict``) looks identical when
the model is built, but is a second parameter: each learns from half the signal, the two drift apart after
the first update, the model has V × D more parameters than it declares, and a checkpoint holds both.

Rule: when a module's two-dimensional ``weight`` is replaced (``nn.Module.register_parameter``, which
``self.head.weight = ...`` goes through, over a weight the module already had), it is compared with the
weights of the same shape of every embedding built before (or, replaced on an embedding, of every other
layer); and at the first training forward of each top-level module, every embedding's
weight is compared with the module's other trained parameters of its shape. A parameter that is not the
embedding's own tensor but is bitwise equal to it (and the embedding is not constant: at least two distinct
values) is a copy (seen when it is set, so an initialisation of the embedding that follows, which a tie would
have shared, does not hide it):

* fail: a copy, in separate storage (two parameters, two optimizer entries), or sharing the storage through
  ``.data`` (two parameters over one matrix: the optimizer updates it twice per step, with two states);
* pass: the embedding's weight is itself the registered weight of another module (tied);
* pass, too: an embedding and no other parameter that starts equal to it (a model that reads the embedding's
  matrix for its output through ``F.linear(h, self.emb.weight)``, or that does not tie at all): nothing is a
  copy, so nothing is untied;
* not applicable: no embedding in a trained model.

Measured: tied ``lm`` reference: the head's weight is the embedding's (pass); with a clone: the two are equal
to the last bit, 0 difference, in separate storage (fail); untied models: the head and embedding start apart
by their random initialisation (differences of order 1e-1: no copy, a pass). Why a correct script cannot fail:
two independently initialised matrices are never bitwise equal, and models that copy weights on purpose
(an EMA or teacher, a MoCo key encoder, a DQN target network) keep the copy in another module that the
optimizer does not train; only trained parameters of one model are compared, and only with an embedding.
A warm start that loads one checkpoint into an embedding and a trained output layer of the same model would
fail; no such script is known to the catalogue. Cost: one comparison per embedding, once per model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import FAIL, NOT_APPLICABLE, PASS, Finding

ID = "tied-weights"
TITLE = "tied weights are one parameter"
SYMPTOM_ID, SYMPTOM = "weight-copies", "parameters that start as exact copies of an embedding"


@dataclass
class Observation:
    embeddings: int = 0  # embeddings seen in trained models
    tied: list[str] = field(default_factory=list)  # "emb.weight is head.weight"
    copies: list[str] = field(default_factory=list)  # "head.weight copies emb.weight (separate storage)"


class Observer:
    def __init__(self, session):
        import weakref

        self.session = session
        self.obs = Observation()
        self.seen: set[int] = set()
        self.layers = weakref.WeakSet()  # modules built so far with a two-dimensional `weight`
        session.on(Event.REGISTERED, ID, self.on_registered)
        session.on(Event.FORWARD, ID, self.on_forward)

    def on_registered(self, module, name: str, param) -> None:
        """Seen before the module stores ``param``: ``module._parameters`` still holds what it replaces."""
        self.registered(module, name, param, name in getattr(module, "_parameters", {}))

    def registered(self, module, name: str, param, replacing: bool) -> None:
        """A parameter set on a module. Its own first one is only noted; one that replaces it
        (``self.head.weight = ...``) is compared with the embeddings built so far (or, set on an embedding,
        with the other layers): the same tensor is a tie, equal values in another tensor a copy."""
        import torch
        from torch import nn

        if param is None or torch.nn.parameter.is_lazy(param) or param.dim() != 2 or name != "weight":
            return  # (a lazy module's weight has no shape until its first forward)
        if not replacing:
            self.layers.add(module)
            return
        embedding = (nn.Embedding, nn.EmbeddingBag)
        for other in list(self.layers):
            weight = other._parameters.get("weight") if other is not module else None
            if not isinstance(weight, torch.Tensor) or weight.shape != param.shape:
                continue
            if isinstance(module, embedding) == isinstance(other, embedding):
                continue
            where = f"{type(module).__name__}.{name}"
            if weight is param:
                self.obs.tied.append(f"{where} set to the weight of the {type(other).__name__} built before it")
            elif copied(weight, param) and not any(c.startswith(f"{where} ") for c in self.obs.copies):
                self.obs.copies.append(f"{where} was set to an exact copy of the weight of the {type(other).__name__} "
                                       f"built before it ("
                                       f"{'same storage' if same_storage(weight, param) else 'separate storage'})")

    def on_forward(self, forward) -> None:
        if not forward.grad or forward.module in self.seen:
            return
        self.seen.add(forward.module)
        module = forward.ref()
        if module is not None:
            inspect(module, self.obs)

    def summary(self) -> Observation:
        return self.obs


def inspect(model, obs: Observation) -> None:
    import torch
    from torch import nn

    names = {}
    owners: dict[int, list[str]] = {}
    for mod_name, mod in model.named_modules(remove_duplicate=False):
        for p_name, p in mod._parameters.items():
            if p is not None:
                full = f"{mod_name}.{p_name}" if mod_name else p_name
                names.setdefault(id(p), (full, p))
                if full not in owners.setdefault(id(p), []):
                    owners[id(p)].append(full)
    embeddings = [m.weight for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
                  and isinstance(m.weight, torch.Tensor)]
    for weight in dict.fromkeys(embeddings):
        obs.embeddings += 1
        if id(weight) not in names:
            continue
        emb_name = names[id(weight)][0]
        if len(owners[id(weight)]) > 1:
            obs.tied.append(f"{' is '.join(owners[id(weight)])}")
        for key, (name, p) in names.items():
            if key == id(weight) or p.shape != weight.shape or not p.requires_grad or not copied(weight, p):
                continue
            if any(c.startswith(f"{name} ") for c in obs.copies):
                continue
            obs.copies.append(f"{name} starts as an exact copy of {emb_name} "
                              f"({'over the same storage, through .data' if same_storage(weight, p) else 'in separate storage'})")


def copied(weight, p) -> bool:
    """``p`` holds exactly ``weight``'s values, and they are not a constant."""
    import torch

    if p is weight or p.device != weight.device or p.dtype != weight.dtype or weight.numel() < 2:
        return False
    with torch.no_grad():
        return torch.equal(p, weight) and not bool((weight == weight.reshape(-1)[0]).all())


def same_storage(a, b) -> bool:
    from checker.tensors import storage_key

    key = storage_key(a)
    return key is not None and key == storage_key(b)


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if obs.copies:
        return Finding(ID, TITLE, FAIL, f"{len(obs.copies)} copies", "0",
                       f"{'; '.join(obs.copies)}: two parameters where the model declares one matrix. The output layer "
                       "is a copy of the embedding, not tied to it (`self.head.weight = self.emb.weight` ties them): "
                       "each learns from half the signal and they drift apart after the first update",
                       observed=f"{len(obs.copies)} trained parameter(s) start bitwise equal to an embedding's weight "
                                "but are separate tensors, and drift apart once training starts")
    if obs.tied:
        return Finding(ID, TITLE, PASS, "0 copies", "0", f"tied: {'; '.join(obs.tied)}",
                       observed="the embedding's weight is shared, as one parameter, with another layer")
    if not obs.embeddings:
        why = "no embedding in a trained model"
        return Finding(ID, TITLE, NOT_APPLICABLE, message=why, observed=why)
    text = ("no trained parameter is a separate copy of an embedding's weight: whatever reads the embedding's matrix "
            "reads that one parameter (an output projection through it, or no tie at all)")
    return Finding(ID, TITLE, PASS, "0 copies", "0", text, observed=text)
