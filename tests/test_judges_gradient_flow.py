"""gradient-flow: the judge on hand-made observations, and the observer's rules on hand-made tensors (no training)."""
from __future__ import annotations

import pytest

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import gradient_flow

CAUSES = ("requires_grad", "no_grad", "frozen", "freeze", "detach", "optimizer", "L2", "penalty", "decay")


def judge(**fields):
    return gradient_flow.judge(gradient_flow.Observation(**fields), RunFacts())


def test_nothing_trained_ran_is_not_applicable():
    assert judge().status == NOT_APPLICABLE


def test_a_starved_parameter_fails_and_the_symptom_names_no_cause():
    finding = judge(took_part=12, starved=["model.deep.0.weight", "model.deep.0.bias"])
    assert finding.status == FAIL and finding.measured == "2 of 12 tensors"
    assert "model.deep.0.weight" in finding.observed
    assert not any(word in finding.observed for word in CAUSES)


def test_a_part_kept_at_its_initial_values_fails_and_the_diagnosis_says_why():
    finding = judge(took_part=10, outside=4, initial=["model.stem.0.weight", "model.stem.0.bias", "model.stem.1.weight",
                                                      "model.stem.1.bias"])
    assert finding.status == FAIL and finding.measured == "4 of 14 tensors"
    assert "requires_grad=False" in finding.message and "no_grad" in finding.message
    assert "never received a gradient that depends on the data" in finding.observed
    assert not any(word in finding.observed for word in CAUSES)


def test_many_names_are_shortened():
    finding = judge(took_part=20, starved=[f"model.layer{i}.weight" for i in range(9)])
    assert finding.observed.endswith("and 3 more)")


def test_values_put_in_after_construction_cannot_tell():
    finding = judge(took_part=2, outside=1, replaced=["model.embedding.weight"])
    assert finding.status == CANNOT_TELL and "load_state_dict" in finding.message
    assert not any(word in finding.observed for word in CAUSES)


def test_deliberate_freezes_pass_and_are_said():
    finding = judge(took_part=2, outside=6, loaded=4, built_frozen=1, moved=1)
    assert finding.status == PASS
    assert "4 loaded before training (pretrained)" in finding.message and "1 built frozen" in finding.message
    assert "moving-average" in finding.message
    assert judge(took_part=3).message == "every trained parameter that ran received a gradient that depends on the data"


def test_a_failure_still_counts_the_deliberate_part_apart():
    finding = judge(took_part=2, outside=6, loaded=4, initial=["model.a.weight", "model.a.bias"])
    assert finding.status == FAIL and "4 loaded before training" in finding.message


# -- the observer's rules, on tensors and modules made by hand ------------------------------------------------


@pytest.fixture
def observer(tmp_path):
    """An observer fed by a real instrumentation (init functions, loading, registration hooks), undone after."""
    from checker.instrument import Instrumentation
    from checker.session import Session

    session = Session(str(tmp_path))
    observer = gradient_flow.Observer(session)
    Instrumentation(session).install()
    yield observer
    session.patches.undo()


def test_a_gradient_that_is_a_multiple_of_the_parameter_does_not_depend_on_the_data(observer):
    import torch

    p = torch.nn.Parameter(torch.randn(8, 4))
    assert observer.read(p, 2e-4 * p.detach()) == (True, False)
    assert observer.read(p, 2e-4 * p.detach() + 1e-3 * torch.randn(8, 4)) == (True, True)
    assert observer.read(p, torch.zeros(8, 4)) == (False, False)
    assert observer.read(torch.nn.Parameter(torch.zeros(8)), torch.ones(8)) == (True, True)  # zero values
    scalar = torch.nn.Parameter(torch.tensor(2.0))
    assert observer.read(scalar, torch.tensor(0.5)) == (True, True)  # a scalar's gradient is always a multiple
    half = torch.nn.Parameter(torch.randn(64).bfloat16())
    assert observer.read(half, (2e-4 * half.detach()).bfloat16()) == (True, False)


def test_values_are_known_from_construction_init_and_attachment(observer):
    import torch

    linear = torch.nn.Linear(4, 3)
    found = observer.origin(linear.weight)
    assert observer.same(found.head, observer.head(linear.weight)) and not found.built_frozen
    torch.nn.init.zeros_(linear.bias.data)  # an initialisation through .data is still construction
    assert observer.same(observer.origin(linear.bias).head, torch.zeros(3))
    with torch.no_grad():
        linear.weight.mul_(3.0)
    assert not observer.same(observer.origin(linear.weight).head, observer.head(linear.weight))
    torch.nn.Sequential(linear)  # attached to a parent: its values now are its built values
    assert observer.same(observer.origin(linear.weight).head, observer.head(linear.weight))


def test_loading_and_replacing_are_told_apart(observer):
    import torch

    source, target = torch.nn.Linear(4, 3), torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    target[0].load_state_dict(source.state_dict())
    assert observer.origin(target[0].weight).loaded and not observer.origin(target[1].weight).loaded
    partial = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    partial.load_state_dict({"0.weight": source.weight, "0.bias": source.bias}, strict=False)
    assert observer.origin(partial[0].weight).loaded and not observer.origin(partial[1].weight).loaded
    target[1].weight = torch.nn.Parameter(torch.randn(2, 3))  # a replacement: its values come from outside
    assert observer.origin(target[1].weight).head is None
    embedding = torch.nn.Embedding.from_pretrained(torch.randn(10, 4))
    assert observer.origin(embedding.weight).loaded and observer.origin(embedding.weight).built_frozen
