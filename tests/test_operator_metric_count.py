"""metric-count's operator: sites only at an evaluation's accuracy whose denominator counts samples."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

CORPUS = Path(__file__).parent / "corpus"


def site_ids(source: str) -> list[str]:
    return [s.id for s in sites(lookup("metric-count"), Context.of(source))]


def test_the_references_have_one_site_the_accuracy_not_the_loss():
    for name in ("classifier.py", "binary.py"):
        assert site_ids((REFERENCES / name).read_text()) == ["metric-count:evaluate:correct / n"]
    planted = inject(lookup("metric-count"), (REFERENCES / "classifier.py").read_text(), 0).source
    assert "return total_loss / n, correct / len(loader)\n" in planted


def test_the_dataset_length_becomes_the_loader_length():
    planted = inject(lookup("metric-count"), (CORPUS / "mnist_cnn_steplr.py").read_text(), 0).source
    assert "100. * correct / len(test_loader)))" in planted
    assert "test_loss /= len(test_loader.dataset)" in planted  # a loss, not an accuracy


HEAD = "import torch\nfrom torch.utils.data import DataLoader\nval = DataLoader(ds, batch_size=8)\n"


@pytest.mark.parametrize(("body", "expected"), [
    # a training accuracy (its loop runs backward) is no site
    ("def fit(model, opt, loader):\n    hits = n = 0\n    for x, y in loader:\n        out = model(x)\n"
     "        out.sum().backward()\n        hits += (out.argmax(1) == y).sum().item()\n        n += len(y)\n"
     "    return hits / n\n\nfit(net, opt, val)\n", []),
    # a running accuracy inside the evaluation loop is no site
    ("hits = n = 0\nfor x, y in val:\n    hits += (net(x).argmax(1) == y).sum().item()\n    n += len(y)\n"
     "    print(hits / n)\n", []),
    # batches sliced from a tensor: no DataLoader to take the length of
    ("hits = n = 0\nfor i in range(0, 100, 10):\n    hits += (net(xs[i:i + 10]).argmax(1) == ys[i:i + 10]).sum()\n"
     "    n += 10\nprint(hits / n)\n", []),
    # a mean loss is not an accuracy; a count that is not a batch's size is not a sample count
    ("tot = n = 0\nfor x, y in val:\n    tot += loss_fn(net(x), y).item() * len(y)\n    n += len(y)\nprint(tot / n)\n", []),
    ("hits = n = 0\nfor x, y in val:\n    hits += (net(x).argmax(1) == y).sum().item()\n    n += 1\nprint(hits / n)\n", []),
    # y.size(0), y.shape[0] and len(val.dataset) count samples
    ("hits = n = 0\nfor x, y in val:\n    hits += net(x).argmax(1).eq(y).sum().item()\n    n += y.size(0)\n"
     "print(f'{100 * hits / n:.1f}%')\n", ["metric-count:<module>:100 * hits / n"]),
    ("hits = n = 0\nfor _, (x, y) in enumerate(val):\n    hits += (net(x).argmax(1) == y).sum().item()\n"
     "    n += y.shape[0]\nacc = hits / n\n", ["metric-count:<module>:hits / n"]),
    ("hits = sum((net(x).argmax(1) == y).sum().item() for x, y in val)\nacc = hits / len(val.dataset)\n",
     ["metric-count:<module>:hits / len(val.dataset)"]),
])
def test_sites_are_evaluation_accuracies_over_a_count_of_samples(body, expected):
    assert site_ids(HEAD + body) == expected
