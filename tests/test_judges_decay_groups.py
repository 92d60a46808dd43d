"""decay-groups: the judge on hand-made observations, and the observer on optimizers built by hand (no training)."""
from __future__ import annotations

import pytest

from checker.events import Event, Update
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import decay_groups


def group(vectors=0, matrices=0, embeddings=0, weight_decay=0.0, lr=1e-3, stated=True, kin=-1):
    return {"params": vectors + matrices + embeddings, "vectors": vectors, "embeddings": embeddings,
            "matrices": matrices, "weight_decay": weight_decay, "lr": lr, "stated": stated, "kin": kin}


def judge(*optimizers):
    obs = decay_groups.Observation([{"optimizer": "AdamW", "groups": list(groups)} for groups in optimizers])
    return decay_groups.judge(obs, RunFacts())


def test_a_decayed_vector_group_like_the_matrix_group_fails_and_the_symptom_names_no_cause():
    finding = judge([group(matrices=6, weight_decay=0.01), group(vectors=8, weight_decay=0.01, kin=0)])
    assert finding.status == FAIL and finding.measured == "1 of 1 groups"
    assert "exempt" in finding.message
    assert finding.observed == ("AdamW: at the first step, a parameter group of 8 one-dimensional tensors had weight "
                                "decay 0.01 and the group of 6 weight matrices 0.01, every other option the same (lr 0.001)")
    for word in ("exempt", "bias", "norm", "should", "mistake"):
        assert word not in finding.observed


def test_any_decay_counts_however_small():
    assert judge([group(matrices=6, weight_decay=0.01), group(vectors=8, weight_decay=1e-12, kin=0)]).status == FAIL


def test_an_exempted_vector_group_passes():
    finding = judge([group(matrices=6, weight_decay=0.01), group(vectors=8, kin=0)])
    assert finding.status == PASS and "weight_decay=0" in finding.message


def test_a_decayed_vector_group_with_its_own_learning_rate_cannot_tell():
    finding = judge([group(matrices=6, weight_decay=5e-4), group(vectors=6, weight_decay=5e-4, lr=2e-3)])
    assert finding.status == CANNOT_TELL and "lr 0.002" in finding.message


@pytest.mark.parametrize(("optimizers", "why"), [
    ((), "no optimizer stepped"),
    (([group(matrices=6), group(vectors=8)],), "no parameter group applied weight decay"),
    (([group(vectors=8, matrices=6, weight_decay=0.01)],), "one group: no sign"),
    (([group(matrices=6, weight_decay=0.01, stated=False), group(vectors=8, weight_decay=0.01, stated=False, kin=0)],),
     "sets no decay per group"),
    (([group(vectors=3, matrices=2, weight_decay=0.01, lr=1e-4), group(vectors=1, matrices=1, weight_decay=0.01)],),
     "apart from the weight matrices"),  # layer-wise learning rates: every group holds a layer's weights and biases
])
def test_not_applicable(optimizers, why):
    finding = judge(*optimizers)
    assert finding.status == NOT_APPLICABLE and why in finding.message


# -- the observer, on optimizers built by hand ----------------------------------------------------------


class Session:
    def __init__(self):
        self.listeners = {}

    def on(self, event, owner, callback):
        self.listeners[event] = callback


@pytest.fixture
def observed(monkeypatch):
    """An observer, fed each parameter group as the instrumentation would (its wrapper of add_param_group ends with
    the test), and a function stepping an optimizer."""
    import torch

    session = Session()
    observer = decay_groups.Observer(session)
    original = torch.optim.Optimizer.add_param_group

    def add_param_group(optimizer, param_group):
        session.listeners[Event.PARAM_GROUP](optimizer, param_group)
        return original(optimizer, param_group)

    monkeypatch.setattr(torch.optim.Optimizer, "add_param_group", add_param_group)
    kept = []  # optimizers stay alive, as a script's do: ids are not reused

    def first_step(optimizer, model=None):
        kept.append(optimizer)
        if model is not None:
            session.listeners[Event.FORWARD](type("Forward", (), {"module": id(model), "ref": lambda self: model})())
        session.listeners[Event.UPDATE_PRE](Update([], optimizer))
        return observer.summary().optimizers[-1]

    return first_step


def model():
    import torch.nn as nn

    return nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 2))


def test_groups_are_described_by_what_they_hold_and_compared_by_their_other_options(observed):
    import torch

    net = model()
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    found = observed(torch.optim.AdamW([{"params": decay, "weight_decay": 0.1, "name": "decay"},
                                        {"params": no_decay, "weight_decay": 0.1, "name": "no_decay"}], lr=1e-3), net)
    assert found["optimizer"] == "AdamW"
    first, second = found["groups"]
    assert (first["matrices"], first["embeddings"], first["vectors"]) == (2, 1, 0)
    assert (second["vectors"], second["weight_decay"], second["stated"], second["kin"]) == (4, 0.1, True, 0)
    assert decay_groups.judge(decay_groups.Observation([found]), RunFacts()).status == FAIL


def test_a_default_decay_is_not_stated_and_another_learning_rate_is_no_kin(observed):
    import torch

    net = model()
    found = observed(torch.optim.SGD([{"params": [p for p in net.parameters() if p.dim() >= 2]},
                                      {"params": [p for p in net.parameters() if p.dim() < 2], "lr": 0.2}],
                                     lr=0.1, weight_decay=1e-4))
    assert [g["stated"] for g in found["groups"]] == [False, False]
    assert found["groups"][1]["kin"] == -1
    single = observed(torch.optim.AdamW(net.parameters()))
    assert len(single["groups"]) == 1 and single["groups"][0]["weight_decay"] == 0.01
