"""data-inplace's operator: sites only where a model's forward rescales a submodule's output by a plain number."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

PAIRS = Path(__file__).parent / "operators"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("data-inplace"), Context.of(source))]


def test_the_classifiers_scaled_residual_sum_is_the_site_and_its_comment_stays():
    source = (REFERENCES / "classifier.py").read_text()
    assert site_ids(source) == ["data-inplace:Classifier.forward:h = h * math.sqrt(0.5)"]
    planted = inject(lookup("data-inplace"), source, 0).source
    assert "            h.data.mul_(math.sqrt(0.5))  # the sum of two unit-variance streams" in planted
    assert "h = h * math.sqrt(0.5)" not in planted


def test_a_script_without_such_a_scaling_says_why():
    with pytest.raises(NoSite, match="`data-inplace` does not apply to binary.py: no model's forward"):
        inject(lookup("data-inplace"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


def test_pairs_in_other_styles_have_one_site_each():
    assert site_ids((PAIRS / "data_inplace__attention_scores.in.py").read_text()) == [
        "data-inplace:CausalSelfAttention.forward:att = att * (1.0 / math.sqrt(k.size(-1)))"]
    assert site_ids((PAIRS / "data_inplace__trainer_helper_divide.in.py").read_text()) == [
        "data-inplace:Seq2Label.forward:h = h / self.temperature"]


HEAD = "import math\nimport torch\nfrom torch import nn\nSCALE = 0.5\n\n\nclass Net(nn.Module):\n"


@pytest.mark.parametrize(("body", "expected"), [
    # a number on the left, a module constant, a local number, a helper method called from forward
    ("    def forward(self, x):\n        h = self.body(x)\n        h = 2.0 * h\n        return h\n", ["h = 2.0 * h"]),
    ("    def forward(self, x):\n        h = self.body(x)\n        h = h * SCALE\n        return h\n", ["h = h * SCALE"]),
    ("    def forward(self, x):\n        s = 1 / math.sqrt(2)\n        h = self.body(x)\n        h = h * s\n        return h\n",
     ["h = h * s"]),
    ("    def __init__(self, d, heads):\n        super().__init__()\n        head_dim = d // heads\n"
     "        self.scale = head_dim ** -0.5\n\n    def forward(self, x):\n        h = self.body(x)\n"
     "        h = h * self.scale\n        return h\n", ["h = h * self.scale"]),
    ("    def forward(self, x):\n        return self.head(self.mix(x))\n\n    def mix(self, x):\n"
     "        z = torch.tanh(self.body(x))\n        z = z / 4\n        return z\n", ["z = z / 4"]),
    # the model's input, not a submodule's output: editing it in place would change the caller's batch
    ("    def forward(self, x):\n        x = x / 255.0\n        return self.body(x)\n", []),
    ("    def forward(self, x):\n        x = x.float()\n        x = x * 2\n        return self.body(x)\n", []),
    # a factor that is a tensor: a learnable gate (its gradient would be cut too), a mask, an argument
    ("    def __init__(self):\n        super().__init__()\n        self.gate = nn.Parameter(torch.ones(4))\n\n"
     "    def forward(self, x):\n        h = self.body(x)\n        h = h * self.gate\n        return h\n", []),
    ("    def forward(self, x):\n        h = self.body(x)\n        m = (x > 0).float()\n        h = h * m\n        return h\n",
     []),
    ("    def forward(self, x, scale):\n        h = self.body(x)\n        h = h * scale\n        return h\n", []),
    # a number divided by the tensor, the tensor times itself, an augmented assignment
    ("    def forward(self, x):\n        h = self.body(x)\n        h = 2 / h\n        h = h * h\n        h *= 2\n"
     "        return h\n", []),
])
def test_sites_need_a_submodule_output_scaled_by_a_plain_number(body, expected):
    assert site_ids(HEAD + body) == [f"data-inplace:Net.{'mix' if 'def mix' in body else 'forward'}:{e}"
                                     for e in expected]


def test_outside_a_module_there_is_no_site():
    source = "import torch\n\n\ndef step(model, x):\n    h = model(x)\n    h = h * 0.5\n    return h\n"
    assert site_ids(source) == []
