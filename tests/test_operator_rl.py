"""The Q-learning operator: target-sync drops the periodic condition of a target network's sync, and plants nowhere
else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

LOOP = """\
for step in range(1000):
    loss = td_loss(online, target, next(batches))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
{sync}
"""
SYNC = "    if step % 100 == 0:\n        target.load_state_dict(online.state_dict())"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("target-sync"), Context.of(source))]


def test_the_sync_keeps_its_line_and_loses_its_condition():
    source = LOOP.format(sync=SYNC)
    assert site_ids(source) == ["target-sync:<module>:target"]
    assert inject(lookup("target-sync"), source, 0).source == \
        LOOP.format(sync="    target.load_state_dict(online.state_dict())")


@pytest.mark.parametrize("sync", [
    # a sync with an else branch: the condition chooses between two things
    SYNC + "\n    else:\n        pass",
    # not periodic: the condition reads a flag, not a remainder
    "    if done:\n        target.load_state_dict(online.state_dict())",
    # a checkpoint restored, not a network copied
    "    if step % 100 == 0:\n        online.load_state_dict(torch.load('best.pt'))",
    # the module loads its own state
    "    if step % 100 == 0:\n        online.load_state_dict(online.state_dict())",
    # more than the sync under the condition: the condition guards other work too
    SYNC + "\n        print(step)",
])
def test_no_site_where_the_condition_is_not_only_a_periodic_sync(sync):
    assert site_ids(LOOP.format(sync=sync)) == []


def test_no_site_outside_training():
    source = ("for epoch in range(10):\n    evaluate(online)\n"
              "    if epoch % 2 == 0:\n        target.load_state_dict(online.state_dict())\n")
    assert site_ids(source) == []
