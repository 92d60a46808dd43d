"""label-leak's operator: sites only where a data function returns a float table of one row per sample and class
labels; never a regression's targets, token ids, or a table of class centres."""
from __future__ import annotations

import pytest
from conftest import ROOT

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

CORPUS = ROOT / "tests" / "corpus"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("label-leak"), Context.of(source))]


def test_a_regression_s_targets_token_ids_and_a_table_of_centres_are_not_sites():
    for name in ("regression", "cnn_text_preempted", "ema", "distill", "simclr"):
        assert site_ids((CORPUS / f"{name}.py").read_text()) == [], name
    with pytest.raises(NoSite, match="no function returns its data as features"):
        inject(lookup("label-leak"), (CORPUS / "regression.py").read_text(), 0, "regression.py")


def test_the_label_goes_into_the_per_sample_table_not_into_the_centres():
    source = """\
import torch


def make(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(4, 8, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    x = centres[y] + torch.randn(n, 8, generator=g)
    return x, y
"""
    assert site_ids(source) == ["label-leak:make:x"]
    assert "    x[:, -1] = y\n    return x, y" in inject(lookup("label-leak"), source, 0).source
    continuous = source.replace("    return x, y", "    return x, x.sum(1)")  # a regression target
    assert site_ids(continuous) == []
