"""sampler-epoch drops the epoch from a sampler's seed, and plants nowhere else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

SAMPLER = """\
import torch


class Shuffled:
    def __init__(self, n, seed=0):
        self.n, self.seed, self.epoch = n, seed, 0
{set_epoch}
    def __iter__(self):
        g = torch.Generator().manual_seed({seed})
        return iter(torch.randperm(self.n, generator=g).tolist())
"""
SET_EPOCH = "\n    def set_epoch(self, epoch):\n        self.epoch = epoch\n\n"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("sampler-epoch"), Context.of(source))]


def test_the_epoch_term_leaves_the_seed():
    source = SAMPLER.format(set_epoch=SET_EPOCH, seed="self.seed + self.epoch")
    assert site_ids(source) == ["sampler-epoch:Shuffled.__iter__:self.seed + self.epoch"]
    assert inject(lookup("sampler-epoch"), source, 0).source == SAMPLER.format(set_epoch=SET_EPOCH, seed="self.seed")


@pytest.mark.parametrize(("set_epoch", "seed"), [
    # no set_epoch: the epoch term is not the one the training loop hands over
    ("\n", "self.seed + self.epoch"),
    # the seed holds no epoch: nothing to drop (already the bug, or a fixed order on purpose)
    (SET_EPOCH, "self.seed + 1"),
    # the epoch alone: dropping it would leave no seed
    (SET_EPOCH, "self.epoch"),
    # the epoch on both sides of the sum: no term without it
    (SET_EPOCH, "self.epoch + 7 * self.epoch"),
    # not a sum: a hash of the pair is rewritten by no single term's removal
    (SET_EPOCH, "hash((self.seed, self.epoch)) % 2 ** 31"),
])
def test_no_site_without_a_sum_with_exactly_one_term_holding_the_stored_epoch(set_epoch, seed):
    assert site_ids(SAMPLER.format(set_epoch=set_epoch, seed=seed)) == []


def test_set_epoch_storing_something_else_is_not_an_epoch():
    """A set_epoch that stores a constant (a no-op kept for the DataLoader's sake) gives no epoch attribute."""
    source = SAMPLER.format(set_epoch="\n    def set_epoch(self, epoch):\n        self.epoch = 0\n\n",
                            seed="self.seed + self.epoch")
    assert site_ids(source) == []
