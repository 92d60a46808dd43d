"""label-alignment: the judge on hand-made observations, and the observer's reading on hand-made tensors (no run)."""
from __future__ import annotations

import torch
from torch.utils.data import TensorDataset

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import label_alignment as la


def pair(agreement, repeated=200, label="[1]", source="y"):
    return {"label": label, "source": source, "agreement": list(agreement), "repeated": [repeated] * len(agreement)}


def loader(*pairs, rows=256, matched=4):
    return {"dataset": "Points", "batches": 4, "matched": matched, "rows": rows, "input": "x", "offset": 0,
            "pairs": list(pairs)}


def judge(*loaders, skipped=(), trained=True):
    return la.judge(la.Observation(list(loaders), list(skipped), trained), RunFacts())


ALIGNED = (0.3, 0.31, 0.32, 1.0, 0.33, 0.3, 0.29)
SHIFTED = (0.3, 0.31, 0.32, 0.33, 1.0, 0.3, 0.29)


def test_labels_of_the_next_item_fail_and_the_symptom_names_no_cause():
    finding = judge(loader(pair(SHIFTED)))
    assert finding.status == FAIL and "1 place after" in finding.message and finding.measured == "33% agree"
    assert finding.observed == ("the labels served with Points's training inputs agreed with the labels it stores for "
                                "those same inputs in only 33% of 256 rows checked")
    for word in ("shift", "index", "after", "before", "next", "off"):
        assert word not in finding.observed


def test_labels_of_the_item_before_fail_too():
    finding = judge(loader(pair((0.3, 0.31, 1.0, 0.33, 0.3, 0.3, 0.29))))
    assert finding.status == FAIL and "1 place before" in finding.message


def test_aligned_labels_pass_in_any_encoding_another_source_may_explain():
    assert judge(loader(pair(ALIGNED))).status == PASS
    assert judge(loader(pair(ALIGNED), pair(SHIFTED, source="cluster"))).status == PASS


def test_one_element_aligned_and_another_of_a_neighbour_cannot_tell():
    finding = judge(loader(pair(ALIGNED), pair(SHIFTED, label="[2]")))
    assert finding.status == CANNOT_TELL and "element [1] matched" in finding.message


def test_without_power_or_explanation_or_rows_it_cannot_tell():
    constant = judge(loader(pair((1.0,) * 7)))
    assert constant.status == CANNOT_TELL and "look the same for neighbouring items" in constant.message
    unique = judge(loader(pair(SHIFTED, repeated=0)))  # regression targets: no value repeats
    assert unique.status == CANNOT_TELL and "predicts the labels served ([1])" in unique.message
    few = judge(loader(pair(SHIFTED), rows=16))
    assert few.status == CANNOT_TELL and "only 16 rows" in few.message
    unmatched = judge(loader(rows=0, matched=0))
    assert unmatched.status == CANNOT_TELL and "matched no rows" in unmatched.message
    assert "no tensor besides the inputs" in judge(loader()).message


def test_not_applicable_without_stored_tensors_or_a_loader():
    finding = judge(skipped=["Pairs stores no tensor of its length"])
    assert finding.status == NOT_APPLICABLE and "Pairs" in finding.message
    assert "no DataLoader fed training" in judge(trained=False).message


def test_the_input_offset_is_found_through_noise_and_a_normalising_transform():
    g = torch.Generator().manual_seed(0)
    stored = torch.randn(100, 16, generator=g)
    index = torch.randperm(100, generator=g)[:64]
    noisy = stored[index] + 0.3 * torch.randn(64, 16, generator=g)
    assert la.match(noisy, stored, index) == 0
    assert la.match((stored[(index + 1) % 100] - 0.5) / 0.3, stored, index) == 1
    assert la.match(torch.randn(64, 16, generator=g), stored, index) is None  # inputs not from the stored rows


def test_agreement_is_the_share_of_rows_a_function_of_the_key_explains():
    assert la.agreement([0, 0, 1, 1], [5, 5, 6, 6]) == 1.0
    assert la.agreement([0, 0, 1, 1], [5, 6, 6, 6]) == 0.75
    ids = la.group_ids(torch.eye(3)[torch.tensor([0, 2, 2, 1])])  # one-hot rows: equal rows, equal ids
    assert ids[1] == ids[2] and len(set(ids)) == 3


def test_stored_tensors_are_attributes_of_the_dataset_length():
    data = TensorDataset(torch.zeros(10, 3), torch.arange(10))
    assert sorted(la.stored_tensors(data, 10)) == ["tensors[0]", "tensors[1]"]

    class Held:
        def __init__(self):
            self.images, self.targets, self.mean, self.paths = torch.zeros(10, 4), [1] * 10, torch.zeros(4), ["a"] * 10

    assert sorted(la.stored_tensors(Held(), 10)) == ["images", "targets"]
