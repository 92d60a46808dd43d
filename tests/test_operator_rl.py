"""The Q-learning operators: target-sync drops the periodic condition of a target network's sync, sync-reversed swaps
its two modules, target-grad lets gradient into a loss's target; each plants nowhere else."""
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


# -- sync-reversed ----------------------------------------------------------------------------------------------

def reversed_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("sync-reversed"), Context.of(source))]


def test_the_sync_swaps_the_module_loaded_and_the_module_read():
    source = LOOP.format(sync=SYNC)
    assert reversed_ids(source) == ["sync-reversed:<module>:target"]
    assert inject(lookup("sync-reversed"), source, 0).source == \
        LOOP.format(sync="    if step % 100 == 0:\n        online.load_state_dict(target.state_dict())")


@pytest.mark.parametrize("source", [
    # the best weights restored once training is over: not a sync
    LOOP.format(sync="") + "online.load_state_dict(best.state_dict())\n",
    # a checkpoint loaded inside the loop: a state read from a file, not another module's
    LOOP.format(sync="    if step % 100 == 0:\n        online.load_state_dict(torch.load('best.pt'))"),
    # a module loading its own state
    LOOP.format(sync="    if step % 100 == 0:\n        online.load_state_dict(online.state_dict())"),
    # an evaluation loop that syncs: no training in it
    "for epoch in range(10):\n    evaluate(online)\n    target.load_state_dict(online.state_dict())\n",
])
def test_no_site_where_no_module_is_synced_from_another_during_training(source):
    assert reversed_ids(source) == []


# -- target-grad ------------------------------------------------------------------------------------------------

STEP = """\
import torch
import torch.nn.functional as F

model, teacher = Student(), Teacher()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
{body}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def target_sites(source: str) -> list[str]:
    return [s.id for s in sites(lookup("target-grad"), Context.of(source))]


def test_a_teacher_forward_under_no_grad_that_makes_the_target_is_the_site():
    body = ("    with torch.no_grad():\n        soft = teacher(x).softmax(1)\n"
            "    loss = F.cross_entropy(model(x), soft)")
    assert target_sites(STEP.format(body=body)) == ["target-grad:<module>:with torch.no_grad()"]
    planted = inject(lookup("target-grad"), STEP.format(body=body), 0).source
    assert "    soft = teacher(x).softmax(1)\n    loss = F.cross_entropy(model(x), soft)" in planted


@pytest.mark.parametrize("body", [
    # the no_grad output is the prediction's input (frozen features under a trained head), not the target
    "    with torch.no_grad():\n        features = teacher(x)\n    loss = F.cross_entropy(model(features), y)",
    # the detached tensor is the prediction (a mistake of its own, not this one)
    "    loss = F.mse_loss(model(x).detach(), teacher(x))",
    # the no_grad block computes no model output (a label smoothed by hand)
    "    with torch.no_grad():\n        soft = F.one_hot(y, 10).float() * 0.9 + 0.01\n"
    "    loss = F.cross_entropy(model(x), soft)",
])
def test_no_site_where_nothing_keeps_a_models_output_out_of_the_target(body):
    assert target_sites(STEP.format(body=body)) == []


def test_no_site_in_acting_or_evaluation():
    source = STEP.format(body="    loss = F.cross_entropy(model(x), y)") + (
        "    with torch.no_grad():\n        action = model(x).argmax(1)\n"
        "with torch.no_grad():\n    val_loss = F.cross_entropy(model(val_x), teacher(val_x).softmax(1))\n")
    assert target_sites(source) == []


def test_the_rl_references_td_target_is_its_only_site():
    from conftest import REFERENCES

    assert target_sites((REFERENCES / "rl.py").read_text()) == ["target-grad:td_target:with torch.no_grad()"]


# -- detach-alias -----------------------------------------------------------------------------------------------

COPIED = """\
import copy
from copy import deepcopy

import torch

online, teacher = QNet(), QNet()
{made}
optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
for s, a, r, s2 in batches:
    loss = td_loss(online, target, s, a, r, s2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def alias_sites(source: str) -> list[str]:
    return [s.id for s in sites(lookup("detach-alias"), Context.of(source))]


def test_a_deep_copy_of_the_trained_network_run_in_training_becomes_a_shallow_one():
    source = COPIED.format(made="target = copy.deepcopy(online)")
    assert alias_sites(source) == ["detach-alias:<module>:copy.deepcopy(online)"]
    assert "target = copy.copy(online)\n" in inject(lookup("detach-alias"), source, 0).source


@pytest.mark.parametrize("made", [
    # a copy of a network no optimizer trains
    "target = copy.deepcopy(teacher)",
    # the copy never runs in training: a snapshot kept for later
    "target = online\nbest = copy.deepcopy(online)",
    # a frozen copy: sharing its weights would freeze the trained network too (the planted script could not train)
    "target = copy.deepcopy(online)\nfor p in target.parameters():\n    p.requires_grad = False",
    "target = copy.deepcopy(online)\ntarget.requires_grad_(False)",
])
def test_no_site_for_copies_that_are_not_a_trained_networks_running_copy(made):
    assert alias_sites(COPIED.format(made=made)) == []


def test_a_deep_copy_imported_by_name_becomes_the_copy_modules_shallow_copy():
    source = COPIED.format(made="target = deepcopy(online)")  # `import copy` is there too: its copy() is used
    assert "target = copy.copy(online)\n" in inject(lookup("detach-alias"), source, 0).source


def test_a_clone_outside_a_loop_over_parameters_is_no_site():
    source = "import torch\n\nfor x in batches:\n    buffer.data = x.clone()\n"
    assert alias_sites(source) == []


def test_the_rl_references_target_copy_is_its_only_site():
    from conftest import REFERENCES

    assert alias_sites((REFERENCES / "rl.py").read_text()) == ["detach-alias:fit:copy.deepcopy(q_net)"]
