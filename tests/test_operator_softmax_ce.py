"""softmax-ce's operator: sites only at losses on raw scores that training backpropagates."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

PAIRS = Path(__file__).parent / "operators"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("softmax-ce"), Context.of(source))]


def test_the_training_loss_is_the_site_and_evaluation_losses_are_not():
    assert site_ids((REFERENCES / "classifier.py").read_text()) == [
        "softmax-ce:train_one_epoch:criterion(out.float(), y)"]
    assert site_ids((PAIRS / "softmax_ce__functional_plain_loop.in.py").read_text()) == [
        "softmax-ce:<module>:F.cross_entropy(net(xs[idx]) / temperature, ys[idx], label_smoothing=0.1)"]
    assert site_ids((PAIRS / "softmax_ce__trainer_class.in.py").read_text()) == [
        "softmax-ce:Trainer.compute_loss:self.loss_function(scores, labels)"]
    assert site_ids((PAIRS / "softmax_ce__bce_module_on_device.in.py").read_text()) == [
        "softmax-ce:run_epoch:criterion(input=logits, target=target.float())"]


def test_a_script_without_a_loss_on_raw_scores_says_why():
    with pytest.raises(NoSite, match="`softmax-ce` does not apply to binary.py: it has no cross-entropy loss on raw"):
        inject(lookup("softmax-ce"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


@pytest.mark.parametrize(("source", "expected"), [
    # the loss reaches backward through a returned value, a model's forward and a dict
    ("import torch.nn.functional as F\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x, y):\n"
     "        out = {}\n        out['loss'] = F.cross_entropy(self.head(x), y)\n        return out\n\n\nmodel = M()\n"
     "for x, y in data:\n    model(x, y)['loss'].backward()\n",
     ["softmax-ce:M.forward:F.cross_entropy(self.head(x), y)"]),
    # a loss module built inline and called at once, its result scaled before backward
    ("import torch\n\nfor x, y in data:\n    loss = torch.nn.CrossEntropyLoss()(net(x), y)\n    scaler.scale(loss).backward()\n",
     ["softmax-ce:<module>:torch.nn.CrossEntropyLoss()(net(x), y)"]),
    # a loss that is only logged, and one under set_grad_enabled(False): no site
    ("import torch.nn.functional as F\nimport torch\n\nfor x, y in data:\n    seen = F.cross_entropy(net(x), y).item()\n"
     "    with torch.set_grad_enabled(False):\n        F.cross_entropy(net(x), y)\n",
     []),
    # a probability-space loss and nll_loss take no raw scores
    ("import torch.nn.functional as F\n\nfor x, y in data:\n    F.nll_loss(net(x), y).backward()\n"
     "    F.binary_cross_entropy(net(x), y).backward()\n",
     []),
])
def test_sites_follow_the_loss_to_backward(source, expected):
    assert site_ids(source) == expected
