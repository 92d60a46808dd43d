"""The workers-respawn operator: drops persistent_workers=True from a multi-worker loader that a repeated training
loop iterates, and plants nowhere else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

SCRIPT = """\
from torch.utils.data import DataLoader

loader = DataLoader(data, batch_size=32, shuffle=True{args})
for epoch in range(10):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("workers-respawn"), Context.of(source))]


def test_the_argument_goes_and_the_rest_of_the_call_stays():
    source = SCRIPT.format(args=", num_workers=4, persistent_workers=True, pin_memory=True")
    assert site_ids(source) == ["workers-respawn:<module>:DataLoader(data)"]
    assert "DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)" in \
        inject(lookup("workers-respawn"), source, 0).source


@pytest.mark.parametrize("args", [
    ", num_workers=0, persistent_workers=True",  # no workers to keep (DataLoader refuses this pair anyway)
    ", num_workers=4, persistent_workers=False",  # already restarted every epoch
    ", num_workers=4",  # nothing to drop
])
def test_no_site_without_persistent_workers_to_drop(args):
    assert site_ids(SCRIPT.format(args=args)) == []


def test_no_site_when_the_loader_is_iterated_once():
    source = SCRIPT.format(args=", num_workers=4, persistent_workers=True").replace(
        "for epoch in range(10):\n    for x, y in loader:", "if True:\n    for x, y in loader:")
    assert site_ids(source) == []


def test_the_classifier_references_training_loader_is_its_only_site():
    from conftest import REFERENCES

    assert site_ids((REFERENCES / "classifier.py").read_text()) == ["workers-respawn:main:DataLoader(train_set)"]
