"""metric-overwrite turns a loop's running count of matches into an assignment, and plants nowhere else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

EVALUATE = """\
def evaluate(model, loader):
    correct, seen = 0, 0
    for x, y in loader:
{body}
        seen += len(y)
    return correct / seen
"""


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("metric-overwrite"), Context.of(source))]


def test_the_running_count_becomes_an_assignment():
    source = EVALUATE.format(body="        correct += (model(x).argmax(1) == y).sum().item()")
    assert site_ids(source) == ["metric-overwrite:evaluate:correct"]
    assert inject(lookup("metric-overwrite"), source, 0).source == \
        EVALUATE.format(body="        correct = (model(x).argmax(1) == y).sum().item()")


@pytest.mark.parametrize("body", [
    # a sum that compares nothing: a loss total, not a count of matches
    "        correct += model(x).sum().item()",
    # errors counted with !=: not a count of matches
    "        correct += (model(x).argmax(1) != y).sum().item()",
    # a count taken away, not added
    "        correct -= (model(x).argmax(1) == y).sum().item()",
    # a name set inside the loop: the count is per batch already
    "        batch_correct = 0\n        batch_correct += (model(x).argmax(1) == y).sum().item()",
])
def test_no_site_without_a_running_count_of_matches(body):
    assert site_ids(EVALUATE.format(body=body)) == []


def test_no_site_outside_a_loop():
    source = ("def score(model, x, y, correct=0):\n    correct = 0\n"
              "    correct += (model(x).argmax(1) == y).sum().item()\n    return correct\n")
    assert site_ids(source) == []
