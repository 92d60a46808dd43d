"""val-leak's operator: a later call of a data-making function takes the first call's arguments; only functions
that make data sets, called more than once in one scope with plain arguments, have sites."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

HELPER = """\
import torch


def make(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] > 0).long()


"""


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("val-leak"), Context.of(source))]


def test_each_later_split_of_a_scope_is_a_site_and_takes_the_first_calls_arguments():
    source = HELPER + "train = make(800, 1)\nval = make(100, 2)\ntest = make(100, 3)\n"
    assert site_ids(source) == ["val-leak:<module>:make(100, 2)", "val-leak:<module>:make(100, 3)"]
    planted = {inject(lookup("val-leak"), source, seed).source for seed in range(8)}
    assert planted == {source.replace("make(100, 2)", "make(800, 1)"), source.replace("make(100, 3)", "make(800, 1)")}


@pytest.mark.parametrize("calls", [
    "train = make(800, 1)\n",  # one split only
    "train = make(800, 1)\nagain = make(800, 1)\n",  # the same arguments: the same data, on purpose
    "train = make(800, seed)\nval = make(100, seed + 1)\n",  # an expression: it may mean another thing elsewhere
    "train = make(*sizes[0])\nval = make(*sizes[1])\n",
    "def f():\n    return make(800, 1)\n\n\ndef g():\n    return make(100, 2)\n",  # other scopes: other runs
])
def test_no_site_without_two_calls_of_plain_other_arguments_in_one_scope(calls):
    assert site_ids(HELPER + calls) == []


def test_a_function_that_makes_no_data_set_is_no_site():
    source = """\
import torch


def schedule(steps, warmup):
    return torch.linspace(0, 1, steps)[:warmup]


a = schedule(100, 10)
b = schedule(200, 20)
"""
    assert site_ids(source) == []
    with pytest.raises(NoSite, match="no data-making function"):
        inject(lookup("val-leak"), source, 0, "schedule.py")
