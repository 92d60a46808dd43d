"""The meta-learning operators: first-order turns the ``create_graph=True`` that reaches an inner gradient of fast
weights into ``False``; inner-inplace writes a fast-weight comprehension's step into the tensors it reads."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

FAST = """\
import torch
from torch.func import functional_call


def adapt(model, x, y, create_graph):
    params = dict(model.named_parameters())
    loss = ((functional_call(model, params, (x,)) - y) ** 2).mean()
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
    return {name: p - 0.1 * g for (name, p), g in zip(params.items(), grads)}


"""


def site_ids(bug: str, source: str) -> list[str]:
    return [s.id for s in sites(lookup(bug), Context.of(source))]


def test_first_order_plants_at_the_training_call_and_never_at_the_evaluation_one():
    source = FAST + "train = adapt(model, x, y, create_graph=True)\nval = adapt(model, x, y, create_graph=False)\n"
    assert site_ids("first-order", source) == ["first-order:<module>:adapt"]
    planted = inject(lookup("first-order"), source, 0).source
    assert planted == source.replace("create_graph=True)", "create_graph=False)")


@pytest.mark.parametrize("source", [
    # a gradient penalty: create_graph=True on the inputs, no fast weights anywhere in the file
    "import torch\nslope = torch.autograd.grad(out.sum(), x, create_graph=True)[0]\n",
    # fast weights, but the inner gradient's create_graph is not a literal True at any call
    FAST + "train = adapt(model, x, y, create_graph=second_order)\n",
    # a keyword True given to a function that does not hand it on as create_graph
    FAST + "def run(model, verbose):\n    return adapt(model, x, y, create_graph=False)\n\n\nrun(model, verbose=True)\n",
])
def test_first_order_has_no_site_where_no_inner_gradient_is_made_differentiable(source):
    assert site_ids("first-order", source) == []


def test_inner_inplace_rewrites_the_comprehension_into_a_loop_over_the_same_tensors():
    source = FAST + "fast = adapt(model, x, y, create_graph=True)\n"
    assert site_ids("inner-inplace", source) == []  # a comprehension returned, not rebound: no name to keep
    assigned = source.replace("    return {name: p - 0.1 * g", "    params = {name: p - 0.1 * g").replace(
        "zip(params.items(), grads)}\n", "zip(params.items(), grads)}\n    return params\n")
    assert site_ids("inner-inplace", assigned) == ["inner-inplace:adapt:params"]
    planted = inject(lookup("inner-inplace"), assigned, 0).source
    assert "    for p, g in zip(params.values(), grads):\n        p.data -= 0.1 * g\n    return params\n" in planted
    assert "p - 0.1 * g" not in planted


@pytest.mark.parametrize("update", [
    "    params = {name: p + 0.1 * g for (name, p), g in zip(params.items(), grads)}\n",  # uphill: not a descent step
    "    params = {name: p - 0.1 * g for (name, p), g in zip(other.items(), grads)}\n",  # reads another dict
    "    params = [p - 0.1 * g for p, g in zip(params, grads) if g is not None]\n",  # a filter changes what is kept
])
def test_inner_inplace_needs_a_plain_descent_comprehension_over_its_own_tensors(update):
    source = FAST.replace("    return {name: p - 0.1 * g for (name, p), g in zip(params.items(), grads)}\n",
                          update + "    return params\n")
    assert site_ids("inner-inplace", source) == []


def test_inner_inplace_needs_a_gradient_taken_in_the_same_function():
    source = "def shift(params, grads):\n    params = [p - 0.1 * g for p, g in zip(params, grads)]\n    return params\n"
    assert site_ids("inner-inplace", source) == []
