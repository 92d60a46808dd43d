"""label-shift's operator: the label a Dataset's __getitem__ reads from an attribute the input does not read."""
from __future__ import annotations

import pytest
from conftest import REFERENCES

from katas.bugs import lookup
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

HEAD = "import torch\nfrom torch.utils.data import Dataset\n\n\nclass Items(Dataset):\n    def __getitem__(self, i):\n"


def found(body: str) -> list[str]:
    return [s.id for s in sites(lookup("label-shift"), Context.of(HEAD + body))]


def test_the_classifier_reference_has_one_site_and_the_binary_one_none():
    assert [s.id for s in sites(lookup("label-shift"), Context.of((REFERENCES / "classifier.py").read_text()))] == [
        "label-shift:JitteredPoints.__getitem__:self.y[i]"]
    with pytest.raises(NoSite, match="no Dataset subclass's __getitem__"):
        inject(lookup("label-shift"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


def test_the_shift_wraps_around_the_label_attribute():
    source = inject(lookup("label-shift"), HEAD + "        return self.x[i], self.y[i]\n", 0).source
    assert source.endswith("return self.x[i], self.y[(i + 1) % len(self.y)]\n")


def test_labels_are_found_through_local_names_and_every_other_attribute_read_by_the_index():
    assert found("        x, y = self.x[i], self.y[i]\n        x = x * 2\n        return x, y\n") == [
        "label-shift:Items.__getitem__:self.y[i]"]
    assert found("        return self.x[i], self.y[i], self.w[i]\n") == [
        "label-shift:Items.__getitem__:self.w[i]", "label-shift:Items.__getitem__:self.y[i]"]


def test_no_site_where_the_input_is_not_read_by_the_index_or_the_label_shares_its_attribute():
    assert found("        return self.read(i), self.y[i]\n") == []  # the input's source is out of sight
    assert found("        return self.tokens[i], self.tokens[i + 1]\n") == []
    assert found("        return self.data[i, :-1], self.data[i, -1]\n") == []
    assert found("        row = self.rows[i]\n        return row, self.rows[i]\n") == []
    not_a_dataset = "class Items:\n    def __getitem__(self, i):\n        return self.x[i], self.y[i]\n"
    assert [s.id for s in sites(lookup("label-shift"), Context.of(not_a_dataset))] == []
