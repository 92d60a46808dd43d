"""loss-shapes: the judge on hand-made observations, and the observer's two routes on hand-made steps (no script)."""
from __future__ import annotations

import weakref

import pytest

from checker.events import Event, Forward, LossCall
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import loss_shapes

TRAINED = RunFacts(backwards=48)
CAUSES = ("broadcast", "squeeze", "unsqueeze", "shape", "column", "target")


def grid(steps=4, reached=True, varied=True, n=64, op="__sub__"):
    return {"op": op, "where": ["train.py:31", "train.py:54"], "grad": [n, 1], "other": [n], "shape": [n, n],
            "steps": steps, "reached": reached, "varied": varied}


def loss(calls=48):
    return {"kind": "mse_loss", "where": ["train.py:40"], "input": [32, 1], "target": [32], "shape": [32, 32],
            "calls": calls}


def judge(facts=TRAINED, **fields):
    return loss_shapes.judge(loss_shapes.Observation(**{"steps": 4, "batch": 64, **fields}), facts)


def test_a_grid_the_backward_pass_went_through_fails_and_the_symptom_names_no_cause():
    finding = judge(grids=[grid()])
    assert finding.status == FAIL and "train.py:31" in finding.message and "broadcast" in finding.message
    assert finding.measured == "4096 values from 64"
    assert finding.observed == ("at 4 training step(s) the loss was computed through 4096 values made from 64 model "
                                "outputs and 64 values without gradient, and the backward pass went through all of them")
    assert not any(word in finding.observed for word in CAUSES)


def test_an_element_wise_loss_over_a_broadcast_fails_at_one_call():
    finding = judge(losses=[loss(calls=1)], steps=0)
    assert finding.status == FAIL and "mse_loss at train.py:40" in finding.message
    assert finding.observed == "at 1 training call(s) the loss averaged 1024 values, where its inputs held 32"
    assert not any(word in finding.observed for word in CAUSES)


def test_a_grid_seen_once_or_with_fixed_values_cannot_tell():
    once = judge(grids=[grid(steps=1)])
    assert once.status == CANNOT_TELL and "only 1 step(s)" in once.message
    fixed = judge(grids=[grid(varied=False)])
    assert fixed.status == CANNOT_TELL and "the same at every step" in fixed.message


def test_a_grid_no_backward_reached_is_not_judged():
    assert judge(grids=[grid(reached=False)]).status == PASS


def test_a_failing_grid_wins_over_an_undecided_one():
    assert judge(grids=[grid(varied=False), grid(op="__mul__")]).status == FAIL


def test_batches_of_one_cannot_tell():
    finding = judge(batch=1)
    assert finding.status == CANNOT_TELL and "single example" in finding.message


def test_nothing_watched_cannot_tell_with_the_reason():
    finding = judge(steps=0, batch=None, unwatched="another torch function mode was active")
    assert finding.status == CANNOT_TELL and finding.message.endswith("another torch function mode was active")
    assert "no nn.Module forward" in judge(steps=0, batch=None).message


def test_watched_steps_or_loss_calls_without_a_grid_pass():
    assert judge().status == PASS
    assert judge(steps=0, batch=None, loss_calls=12).status == PASS


def test_not_applicable_without_a_backward_pass():
    assert judge(facts=RunFacts(), grids=[grid()]).status == NOT_APPLICABLE


# -- the observer, on steps made by hand ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def eager(monkeypatch):
    """This test process may have loaded torch._dynamo (an optimizer step does): the scripts here compile nothing."""
    monkeypatch.setattr(loss_shapes, "compiles", lambda: False)


class Session:
    def __init__(self):
        self.listeners, self.errors = {}, {}

    def on(self, event, owner, callback):
        self.listeners[event] = callback


def train(make_loss, steps=3, batch=8, seed=0):
    """Run ``steps`` steps of a linear model with one output column through the observer's events; ``make_loss(out,
    y)`` gets the model's (B, 1) output and a (B,) target."""
    import torch

    session, g = Session(), torch.Generator().manual_seed(seed)
    observer = loss_shapes.Observer(session)
    model = torch.nn.Linear(3, 1)
    try:
        for i in range(steps):
            x, y = torch.randn(batch, 3, generator=g), torch.randn(batch, generator=g)
            forward = Forward(i, id(model), "Linear", True, None, batch, ref=weakref.ref(model))
            session.listeners[Event.FORWARD](forward)
            out = model(x)
            session.listeners[Event.FORWARD_END](forward, out)
            value = make_loss(out, y)
            session.listeners[Event.BACKWARD](value)
            value.backward()
    finally:
        obs = observer.summary()
    assert torch._C._len_torch_function_stack() == 0, "the mode must be off the stack"
    return obs


def status(obs):
    return loss_shapes.judge(obs, TRAINED).status


@pytest.mark.parametrize("make_loss", [
    lambda out, y: ((out - y) ** 2).mean(),
    lambda out, y: (y - out).abs().mean(),
    lambda out, y: -(y * out.sigmoid().log()).mean(),
    lambda out, y: ((out.T - y[:, None]) ** 2).mean(),  # the mirror: a (1, B) row against a (B, 1) column
], ids=["sub", "rsub", "mul", "mirror"])
def test_a_cross_batch_grid_fails(make_loss):
    obs = train(make_loss)
    assert status(obs) == FAIL and obs.steps == 3
    assert obs.grids[0]["reached"] and obs.grids[0]["varied"] and obs.grids[0]["shape"] == [8, 8]


@pytest.mark.parametrize("make_loss", [
    lambda out, y: ((out.squeeze(-1) - y) ** 2).mean(),
    lambda out, y: ((out - y[:, None]) ** 2).mean(),
    lambda out, y: (out[:, None, 0] - out[None, :, 0]).pow(2).mean(),  # pairwise, both sides with gradient
    lambda out, y: (out - out.detach().T).pow(2).mean(),  # pairwise against a detached copy of itself
    lambda out, y: (out * (y[:, None] == y[None, :]).float()).mean(),  # a (B, B) label mask
], ids=["squeezed", "column-target", "pairwise", "detached-self", "label-mask"])
def test_matching_shapes_and_deliberate_pairs_pass(make_loss):
    obs = train(make_loss)
    assert status(obs) == PASS and obs.grids == []


def test_a_grid_against_a_fixed_vector_cannot_tell():
    import torch

    bins = torch.linspace(-1, 1, 8)
    assert status(train(lambda out, y: (out - bins).pow(2).mean())) == CANNOT_TELL


def test_a_grid_the_loss_does_not_use_is_not_judged():
    def logged(out, y):
        (out - y).abs().mean().detach()  # a metric on the side, never backpropagated
        return ((out.squeeze(-1) - y) ** 2).mean()

    obs = train(logged)
    assert status(obs) == PASS and not obs.grids[0]["reached"]


def test_only_the_first_steps_are_watched():
    obs = train(lambda out, y: ((out.squeeze(-1) - y) ** 2).mean(), steps=loss_shapes.STEPS + 3)
    assert obs.steps == loss_shapes.STEPS


def test_batches_of_one_show_nothing():
    assert status(train(lambda out, y: ((out - y) ** 2).mean(), batch=1)) == CANNOT_TELL


def test_the_window_is_not_opened_over_a_mode_the_script_entered():
    import torch
    from torch.overrides import TorchFunctionMode

    session = Session()
    observer = loss_shapes.Observer(session)
    model = torch.nn.Linear(3, 1)
    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    forward = Forward(0, id(model), "Linear", True, None, 4, ref=weakref.ref(model))
    with Passing():
        session.listeners[Event.FORWARD_END](forward, model(torch.randn(4, 3)))
        assert torch._C._len_torch_function_stack() == 1
    obs = observer.summary()
    assert obs.unwatched == "another torch function mode was active" and status(obs) == CANNOT_TELL


def loss_call(x, y, kind="mse_loss", reduction="mean"):
    return LossCall(kind, x, y, None, reduction, None)


def test_a_loss_function_over_a_broadcast_fails_at_once():
    import torch

    session = Session()
    observer = loss_shapes.Observer(session)
    session.listeners[Event.LOSS](loss_call(torch.zeros(16, 1, requires_grad=True), torch.zeros(16)))
    obs = observer.summary()
    assert obs.losses[0]["shape"] == [16, 16] and status(obs) == FAIL


@pytest.mark.parametrize(("x", "y", "kind", "reduction"), [
    ((16,), (16,), "mse_loss", "mean"),
    ((16, 1), (16, 1), "l1_loss", "mean"),
    ((16, 4), (4,), "mse_loss", "mean"),  # a target broadcast along rows: no more elements than the input
    ((16, 1), (16,), "mse_loss", "none"),  # unreduced: left to the window, which reads what it returns
    ((16, 1), (16,), "cross_entropy", "mean"),  # class-index targets differ in shape by design
], ids=["same", "columns", "row-target", "unreduced", "cross-entropy"])
def test_loss_functions_that_pair_each_output_with_its_target_pass(x, y, kind, reduction):
    import torch

    session = Session()
    observer = loss_shapes.Observer(session)
    session.listeners[Event.LOSS](loss_call(torch.zeros(x, requires_grad=True), torch.zeros(y), kind, reduction))
    assert observer.summary().losses == []


def test_evaluation_loss_calls_are_not_judged():
    import torch

    session = Session()
    observer = loss_shapes.Observer(session)
    session.listeners[Event.LOSS](loss_call(torch.zeros(16, 1), torch.zeros(16)))
    obs = observer.summary()
    assert obs.losses == [] and obs.loss_calls == 0


def test_a_default_device_does_not_stop_the_watch():
    import torch

    torch.set_default_device("cpu")
    try:
        session = Session()
        observer = loss_shapes.Observer(session)
        model = torch.nn.Linear(3, 1)
        forward = Forward(0, id(model), "Linear", True, None, 4, ref=weakref.ref(model))
        for _ in range(2):
            out, y = model(torch.randn(4, 3)), torch.randn(4)
            session.listeners[Event.FORWARD_END](forward, out)
            value = ((out - y) ** 2).mean()
            session.listeners[Event.BACKWARD](value)
            value.backward()
        obs = observer.summary()
        assert torch._C._len_torch_function_stack() == 1  # the default device's context, left as it was
    finally:
        torch.set_default_device(None)
    assert status(obs) == FAIL


def test_a_script_that_compiles_is_not_watched(monkeypatch):
    monkeypatch.setattr(loss_shapes, "compiles", lambda: True)
    obs = train(lambda out, y: ((out - y) ** 2).mean())
    assert obs.steps == 0 and obs.unwatched == "the script compiles code (torch.compile)"
    assert status(obs) == CANNOT_TELL
