"""orphan-params' operator: sites only where a plain list or dict runs as the container did, and trains less."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

CORPUS = Path(__file__).parent / "corpus"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("orphan-params"), Context.of(source))]


def test_the_classifier_blocks_are_the_site_and_the_edit_keeps_the_alignment():
    source = (REFERENCES / "classifier.py").read_text()
    assert site_ids(source) == ["orphan-params:Classifier.__init__:self.blocks = nn.ModuleList(...)"]
    planted = inject(lookup("orphan-params"), source, 0).source
    assert ("        self.blocks = [nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))\n"
            "                       for _ in range(depth)]\n") in planted


def test_a_script_without_a_site_says_why():
    with pytest.raises(NoSite, match="`orphan-params` does not apply to binary.py: no model's __init__ assigns a"):
        inject(lookup("orphan-params"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


@pytest.mark.parametrize("path", [
    CORPUS / "grad_checkpoint.py",  # the blocks hold dropout: model.eval() would miss it too, another symptom
    CORPUS / "lm_sliced_accum.py",  # a ModuleDict read by attribute (self.transformer.wte): a dict would crash
    FIXTURES / "general__trainer_class.py",  # the list holds every parameter and batch-norm: nothing left to train
], ids=lambda p: p.stem)
def test_no_site_where_a_plain_container_would_crash_or_show_another_symptom(path):
    assert site_ids(path.read_text()) == []


HEAD = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
       "        self.inp = nn.Linear(4, 8)\n"
FORWARD = "\n    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n"


@pytest.mark.parametrize(("init", "more", "expected"), [
    ("        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])\n", "", 1),
    # members that act differently in evaluation
    ("        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Dropout(0.1)])\n", "", 0),
    # members without parameters: nothing would go untrained
    ("        self.layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])\n", "", 0),
    # a use a plain list does not support, or one that registers the blocks anyway
    ("        self.layers = nn.ModuleList([nn.Linear(8, 8)])\n", "        self.layers.apply(init)\n", 0),
    ("        self.layers = nn.ModuleList([nn.Linear(8, 8)])\n", "        self.body = nn.Sequential(*self.layers)\n", 0),
    # built from a name: what it holds is not read
    ("        self.layers = nn.ModuleList(blocks)\n", "", 0),
])
def test_sites_need_a_plain_container_to_run_as_the_module_container_did(init, more, expected):
    source = HEAD + init + more + FORWARD
    assert len(site_ids(source)) == expected


def test_a_module_dict_read_by_key_is_a_site_and_one_read_by_attribute_is_not():
    by_key = HEAD + "        self.heads = nn.ModuleDict(dict(a=nn.Linear(8, 2)))\n\n    def forward(self, x, k):\n" \
                    "        return self.heads[k](self.inp(x)) if k in self.heads else None\n"
    assert site_ids(by_key) == ["orphan-params:Net.__init__:self.heads = nn.ModuleDict(...)"]
    assert "self.heads = dict(a=nn.Linear(8, 2))" in inject(lookup("orphan-params"), by_key, 0).source
    by_attribute = by_key.replace("self.heads[k](self.inp(x)) if k in self.heads else None", "self.heads.a(x)")
    assert site_ids(by_attribute) == []


def test_a_member_class_of_the_file_is_read_for_parameters_and_evaluation_behaviour():
    block = "import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Block(nn.Module):\n" \
            "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n" \
            "    def forward(self, x):\n        return F.dropout(self.fc(x), 0.1, self.training)\n\n\n"
    model = "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
            "        self.inp = nn.Linear(4, 8)\n        self.layers = nn.ModuleList(Block() for _ in range(2))\n" + FORWARD
    assert site_ids(block + model) == []
    plain_block = block.replace("F.dropout(self.fc(x), 0.1, self.training)", "F.relu(self.fc(x))")
    assert site_ids(plain_block + model) == ["orphan-params:Net.__init__:self.layers = nn.ModuleList(...)"]


def test_the_module_must_keep_parameters_of_its_own():
    source = HEAD.replace("        self.inp = nn.Linear(4, 8)\n", "        self.act = nn.ReLU()\n") \
        + "        self.layers = nn.ModuleList([nn.Linear(8, 8)])\n" + FORWARD
    assert site_ids(source) == []
