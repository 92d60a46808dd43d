"""shape-broadcast's operator: sites only where a model's output column is squeezed for a loss that accepts both shapes."""
from __future__ import annotations

import pytest
from conftest import REFERENCES, ROOT

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("shape-broadcast"), Context.of(source))]


def test_the_binary_reference_returns_its_column_squeezed_and_the_classifier_has_no_site():
    assert site_ids((REFERENCES / "binary.py").read_text()) == [
        "shape-broadcast:Scorer.forward:self.head(self.encoder(x)).squeeze(-1)"]
    with pytest.raises(NoSite, match="`shape-broadcast` does not apply to classifier.py: no model output is squeezed"):
        inject(lookup("shape-broadcast"), (REFERENCES / "classifier.py").read_text(), 0, "classifier.py")


def test_a_forward_returning_a_tuple_and_a_loop_squeezing_an_unpacked_model_are_sites():
    assert site_ids((ROOT / "tests" / "corpus" / "two_optimizers.py").read_text()) == [
        "shape-broadcast:MultiTask.forward:self.reg(h).squeeze(-1)", "shape-broadcast:main:aux(x).squeeze(-1)"]


HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\nnet = nn.Linear(4, 1)\n"


@pytest.mark.parametrize(("source", "expected"), [
    # the squeeze forms, on a model's output in a training loop
    (HEAD + "for x, y in data:\n    F.l1_loss(net(x).squeeze(), y).backward()\n",
     ["shape-broadcast:<module>:net(x).squeeze()"]),
    (HEAD + "for x, y in data:\n    out = net(x)\n    ((out.reshape(-1) - y) ** 2).mean().backward()\n",
     ["shape-broadcast:<module>:out.reshape(-1)"]),
    # a binary cross-entropy refuses mismatched shapes: removing the squeeze would crash, not broadcast
    (HEAD + "for x, y in data:\n    F.binary_cross_entropy_with_logits(net(x).squeeze(-1), y).backward()\n", []),
    (HEAD + "crit = nn.BCELoss()\nfor x, y in data:\n    crit(net(x).view(-1), y).backward()\n", []),
    # evaluation, another dimension, a squeeze of something that is not a model's output: no site
    (HEAD + "with torch.no_grad():\n    for x, y in data:\n        F.mse_loss(net(x).squeeze(-1), y)\n", []),
    (HEAD + "for x, y in data:\n    F.mse_loss(net(x).squeeze(0), y).backward()\n", []),
    (HEAD + "for x, y in data:\n    F.mse_loss(net(x), y.view(-1)).backward()\n", []),
    # a forward flattening a layer of several outputs: removing that would not broadcast, it would crash
    ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
     "        super().__init__()\n        self.head = nn.Sequential(nn.ReLU(), nn.Linear(8, 10))\n"
     "    def forward(self, x):\n        return self.head(x).view(-1)\n", []),
    ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
     "        super().__init__()\n        self.head = nn.Linear(8, out_features=1)\n"
     "    def forward(self, x):\n        return self.head(x).view(-1)\n", ["shape-broadcast:M.forward:self.head(x).view(-1)"]),
    # inside a model, only what forward returns: an inner squeeze is the model's own business
    ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n"
     "        w = self.gate(x).squeeze(-1)\n        return self.head(x) * w[:, None]\n", []),
])
def test_sites(source, expected):
    assert site_ids(source) == expected


def test_a_model_known_only_by_its_name_is_a_guessed_site():
    source = "class Trainer:\n    def step(self, x, y):\n        loss = ((self.model(x)[:, 0] - y) ** 2).mean()\n" \
             "        loss.backward()\n"
    found = sites(lookup("shape-broadcast"), Context.of(source))
    assert [(s.id, s.guessed) for s in found] == [("shape-broadcast:Trainer.step:self.model(x)[:, 0]", True)]
