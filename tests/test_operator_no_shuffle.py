"""no-shuffle's operator: a site only where a training loop iterates a shuffled DataLoader."""
from __future__ import annotations

import pytest
from conftest import REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"
TRAIN = "    opt.zero_grad()\n    loss_fn(net(x), y).backward()\n    opt.step()\n"


def found(source: str) -> list[tuple[str, bool]]:
    return [(s.id, s.guessed) for s in sites(lookup("no-shuffle"), Context.of(HEAD + source))]


def test_the_references_training_loaders_are_the_sites():
    assert [s.id for s in sites(lookup("no-shuffle"), Context.of((REFERENCES / "classifier.py").read_text()))] == [
        "no-shuffle:main:DataLoader(train_set)"]
    binary = inject(lookup("no-shuffle"), (REFERENCES / "binary.py").read_text(), 0)
    assert "batch_size=64, shuffle=False," in binary.source and binary.source.count("shuffle=") == 1


def test_a_shuffled_loader_no_training_loop_iterates_is_no_site():
    source = ("train = DataLoader(a, batch_size=8, shuffle=True)\nshown = DataLoader(b, shuffle=True)\n"
              "for x, y in train:\n" + TRAIN + "for x, _ in shown:\n    print(net(x))\n")
    assert found(source) == [("no-shuffle:<module>:DataLoader(a)", False)]


def test_the_loader_is_followed_through_calls_and_attributes():
    source = ("class Fit:\n    def __init__(self, data):\n        self.data = data\n\n    def run(self):\n"
              "        for x, y in self.data:\n" + TRAIN.replace("    ", "            ") +
              "\n\nFit(DataLoader(ds, shuffle=True)).run()\n")
    assert found(source) == [("no-shuffle:<module>:DataLoader(ds)", False)]


def test_positional_and_dict_flags_are_sites_and_an_unfollowed_loader_is_a_guess():
    assert found("dl = DataLoader(ds, 32, True)\nfor x, y in dl:\n" + TRAIN) == [("no-shuffle:<module>:DataLoader(ds)",
                                                                                  False)]
    kwargs = "kw = {'batch_size': 8, 'shuffle': True}\ndl = DataLoader(ds, **kw)\nfor x, y in dl:\n" + TRAIN
    assert found(kwargs) == [("no-shuffle:<module>:DataLoader(ds, **kw)", False)]
    assert found("trainer.fit(DataLoader(ds, shuffle=True))\n") == [("no-shuffle:<module>:DataLoader(ds)", True)]


def test_no_site_without_a_shuffled_loader():
    for source in ("dl = DataLoader(ds, shuffle=False)\nfor x, y in dl:\n" + TRAIN,
                   "dl = DataLoader(ds, sampler=RandomSampler(ds))\nfor x, y in dl:\n" + TRAIN,
                   "dl = DataLoader(ds, shuffle=is_train)\nfor x, y in dl:\n" + TRAIN):
        assert found(source) == []
    with pytest.raises(NoSite, match="no DataLoader built with shuffle=True"):
        inject(lookup("no-shuffle"), HEAD + "dl = DataLoader(ds)\n", 0)
