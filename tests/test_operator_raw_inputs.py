"""raw-inputs' operator: sites only where computed statistics standardise what a model is fed."""
from __future__ import annotations

import pytest
from conftest import REFERENCES, ROOT

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

CORPUS = ROOT / "tests" / "corpus"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("raw-inputs"), Context.of(source))]


def test_the_classifier_loses_every_standardisation_and_its_statistics():
    source = (REFERENCES / "classifier.py").read_text()
    assert site_ids(source) == ["raw-inputs:main:(x - mean) / std"]
    planted = inject(lookup("raw-inputs"), source, 0).source
    assert "mean, std" not in planted and "/ std" not in planted
    assert "JitteredPoints(x, y, jitter=0.3)" in planted and "JitteredPoints(val_x, val_y)" in planted


def test_binary_has_no_site_and_says_why():
    with pytest.raises(NoSite, match="standardises no model input"):
        inject(lookup("raw-inputs"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


def test_an_assignment_left_assigning_nothing_goes_and_targets_are_no_site():
    source = (CORPUS / "regression.py").read_text()
    assert site_ids(source) == ["raw-inputs:<module>:(X_train - x_mu) / x_sigma"]  # not y: it is the target
    planted = inject(lookup("raw-inputs"), source, 0).source
    assert "x_mu" not in planted and "X_train, X_valid = X_train, X_valid" not in planted
    assert "y_train, y_valid = (y_train - y_mu) / y_sigma, (y_valid - y_mu) / y_sigma" in planted


HEAD = "import torch\nfrom torch.utils.data import TensorDataset\n"


@pytest.mark.parametrize(("body", "expected"), [
    # a hand-written layer norm inside a model is part of the model
    ("class Norm(torch.nn.Module):\n    def forward(self, x):\n        mean = x.mean(-1, keepdim=True)\n"
     "        std = x.std(-1, keepdim=True)\n        return self.lin((x - mean) / std)\n", []),
    # advantages standardised at every training step are not inputs
    ("for step in range(10):\n    adv = returns - values\n    m, s = adv.mean(), adv.std()\n"
     "    loss = -(policy(obs) * ((adv - m) / s)).mean()\n    loss.backward()\n", []),
    # statistics handed in, not computed here: constants, parameters
    ("def prepare(x, mean, std):\n    return TensorDataset((x - mean) / std)\n", []),
    ("MEAN, STD = 0.5, 0.25\nds = TensorDataset((x - MEAN) / STD, y)\n", []),
    # computed statistics, fed to a dataset as its first tensor
    ("m = x.mean(0)\ns = x.var(0).sqrt()\nds = TensorDataset((x - m) / s, y)\n", ["raw-inputs:<module>:(x - m) / s"]),
])
def test_sites_are_computed_standardisations_of_inputs(body, expected):
    assert site_ids(HEAD + body) == expected


def test_statistics_read_elsewhere_are_kept():
    source = HEAD + "m, s = x.mean(0), x.std(0)\nds = TensorDataset((x - m) / s, y)\ntorch.save({'m': m, 's': s}, 'stats.pt')\n"
    planted = inject(lookup("raw-inputs"), source, 0).source
    assert "m, s = x.mean(0), x.std(0)\nds = TensorDataset(x, y)\n" in planted
