"""val-on-train hands an evaluation call the data its scope trains on, and plants nowhere else."""
from __future__ import annotations

import pytest

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

FUNCTIONS = """\
import torch
import torch.nn.functional as F


def train_one_epoch(model, loader, optimizer):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader):
    return sum(F.cross_entropy(model(x), y).item() for x, y in loader)


"""


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("val-on-train"), Context.of(source))]


def test_the_evaluation_gets_the_training_data():
    loop = "for epoch in range(3):\n    train_one_epoch(model, train_loader, opt)\n    print(evaluate(model, {}))\n"
    source = FUNCTIONS + loop.format("val_loader")
    assert site_ids(source) == ["val-on-train:<module>:val_loader"]
    assert inject(lookup("val-on-train"), source, 0).source == FUNCTIONS + loop.format("train_loader")


@pytest.mark.parametrize("loop", [
    # a training accuracy only: the evaluation already reads the training data
    "for epoch in range(3):\n    train_one_epoch(model, train_loader, opt)\n    print(evaluate(model, train_loader))\n",
    # the evaluation runs in another scope than the training: which data trains there is not known
    "def final():\n    print(evaluate(model, test_loader))\n\n\n"
    "for epoch in range(3):\n    train_one_epoch(model, train_loader, opt)\n",
    # no training in the file's functions: the evaluation stands alone
    "print(evaluate(model, val_loader))\n",
    # the data handed over is an expression, not a name: nothing to swap in
    "for epoch in range(3):\n    train_one_epoch(model, loaders['train'], opt)\n    print(evaluate(model, loaders['val']))\n",
])
def test_no_site_without_a_training_name_and_another_evaluation_name_in_one_scope(loop):
    assert site_ids(FUNCTIONS + loop) == []


def test_no_site_when_the_functions_slice_their_data_by_hand():
    """The lm reference's shape: chunks cut from a tensor, no loop over the data itself."""
    source = """\
import torch


def train_one_epoch(model, data, optimizer):
    for step in range(len(data) // 16):
        loss = model(data[step * 16:(step + 1) * 16]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, data):
    return sum(model(data[i:i + 16]).mean().item() for i in range(0, len(data), 16))


train_one_epoch(model, train_data, opt)
print(evaluate(model, val_data))
"""
    assert site_ids(source) == []


def test_a_function_that_backpropagates_is_not_an_evaluation():
    """Two training functions (a warm-up and the main phase) on two datasets: neither is an evaluation."""
    source = FUNCTIONS + ("def finetune(model, loader, optimizer):\n"
                          "    for x, y in loader:\n"
                          "        F.cross_entropy(model(x), y).backward()\n        optimizer.step()\n\n\n"
                          "train_one_epoch(model, pretrain_loader, opt)\nfinetune(model, task_loader, opt)\n")
    assert site_ids(source) == []


TRAIN_LOOP = """\
import torch
import torch.nn.functional as F

for epoch in range(3):
    for x, y in train_loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_an_evaluation_loop_beside_a_training_loop_reads_the_training_data():
    evaluation = "    with torch.no_grad():\n        for x, y in {}:\n            print(model(x).argmax(1).eq(y).sum())\n"
    source = TRAIN_LOOP + evaluation.format("val_loader")
    assert site_ids(source) == ["val-on-train:<module>:val_loader"]
    assert inject(lookup("val-on-train"), source, 0).source == TRAIN_LOOP + evaluation.format("train_loader")


@pytest.mark.parametrize("evaluation", [
    # one loop per phase over a dict of loaders: no name of its own to swap
    "    for phase in ('train', 'val'):\n        with torch.no_grad():\n"
    "            for x, y in loaders[phase]:\n                print(model(x).sum())\n",
    # a training accuracy: the evaluation loop already reads the training data
    "    with torch.no_grad():\n        for x, y in train_loader:\n            print(model(x).sum())\n",
    # a loop over something else than data: a sweep of thresholds, no model run
    "    for threshold in thresholds:\n        print(threshold)\n",
])
def test_no_loop_site_without_an_evaluation_loop_over_a_name_of_its_own(evaluation):
    assert site_ids(TRAIN_LOOP + evaluation) == []


def test_no_loop_site_across_scopes_a_name_cannot_cross():
    """The evaluation reads a local of its function; the training a global: the global is not the data the
    evaluation's function was given."""
    source = TRAIN_LOOP + ("\n\ndef report(model, loader):\n    with torch.no_grad():\n"
                           "        for x, y in loader:\n            print(model(x).sum())\n")
    assert site_ids(source) == []
