"""The zero-order operator: moves the reset that precedes a backward pass to just before the step, and plants
nowhere else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

LOOP = """\
import torch

optimizer = torch.optim.Adam(model.parameters())
for x, y in loader:
{body}
"""


def site_ids(body: str) -> list[str]:
    return [s.id for s in sites(lookup("zero-order"), Context.of(LOOP.format(body=body)))]


def test_the_reset_moves_to_just_before_the_step_with_its_comment_left_in_place():
    body = ("    # a fresh gradient for every batch\n    optimizer.zero_grad()\n    loss = loss_fn(model(x), y)\n"
            "    loss.backward()\n    clip(model)\n    optimizer.step()")
    planted = inject(lookup("zero-order"), LOOP.format(body=body), 0).source
    assert planted.endswith("    # a fresh gradient for every batch\n    loss = loss_fn(model(x), y)\n    loss.backward()\n"
                            "    clip(model)\n    optimizer.zero_grad()\n    optimizer.step()\n")


@pytest.mark.parametrize("body", [
    # reset after the step: already correct, and nothing precedes a backward pass
    "    loss = loss_fn(model(x), y)\n    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()",
    # gradient accumulation: the reset and the step sit in the boundary's branch, the backward outside it
    "    (loss_fn(model(x), y) / 4).backward()\n    if i % 4 == 0:\n        optimizer.step()\n"
    "        optimizer.zero_grad()",
    # no step after the backward in this block (it is taken elsewhere)
    "    optimizer.zero_grad()\n    loss_fn(model(x), y).backward()\n    closure_steps.append(x)",
    # a second reset between: moving the first would change nothing a run shows
    "    optimizer.zero_grad()\n    loss_fn(model(x), y).backward()\n    optimizer.zero_grad()\n    optimizer.step()",
])
def test_no_site_where_no_reset_precedes_a_backward_that_a_step_follows(body):
    assert site_ids(body) == []


def test_the_accumulating_text_reference_has_no_site_and_the_others_one():
    from conftest import REFERENCES

    found = {p.stem: [s.id for s in sites(lookup("zero-order"), Context.of(p.read_text()))]
             for p in sorted(REFERENCES.glob("*.py"))}
    assert found.pop("text") == [] and all(len(ids) == 1 for ids in found.values())
