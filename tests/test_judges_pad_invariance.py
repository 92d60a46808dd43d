"""pad-invariance: the judge on hand-made observations, and the comparison on a tiny model (no training)."""
from __future__ import annotations

import torch
import torch.nn as nn

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import pad_invariance
from checker.probes._shared.token_inputs import TokenForward, float_copy, padding_id


def judge(**fields):
    base = dict(model="Classifier", pad=0, pad_source="the embedding's padding_idx", samples=[[5, 12], [6, 12]],
                scale=2.0)
    return pad_invariance.judge(pad_invariance.Observation(**{**base, **fields}), RunFacts())


def test_rounding_passes_a_clear_change_fails_in_between_is_undecided():
    assert judge(changes=[1e-7, 0.0]).status == PASS
    finding = judge(changes=[0.15, 0.1])
    assert finding.status == FAIL and "padding" in finding.observed
    for word in ("mask", "attention", "average"):
        assert word not in finding.observed
    assert judge(changes=[5e-5, 0.0]).status == CANNOT_TELL


def test_premises():
    assert judge(model="").status == NOT_APPLICABLE
    assert judge(pad=None, problem="no padding id").status == NOT_APPLICABLE
    assert judge(batch_dependent="bn normalises with batch statistics").status == CANNOT_TELL
    assert judge(problem="no sample of the batches seen ends in padding").status == CANNOT_TELL


class Pooler(nn.Module):
    def __init__(self, masked):
        super().__init__()
        self.embed, self.head, self.masked = nn.Embedding(10, 8, padding_idx=0), nn.Linear(8, 3), masked

    def forward(self, tokens, keep):
        h = self.embed(tokens) + 1.0
        pooled = (h * keep[..., None]).sum(1) / keep.sum(1, keepdim=True) if self.masked else h.mean(1)
        return self.head(pooled)


def compare(masked):
    torch.manual_seed(0)
    tokens = torch.tensor([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    keep = tokens != 0
    model = Pooler(masked)
    found = TokenForward(model, (tokens, keep), {}, tokens, 0, "")
    row = pad_invariance.padded_rows(found)
    assert row == [0]
    change, _ = pad_invariance.compare(float_copy(model), found, 0, 3)
    return change


def test_the_comparison_separates_masked_from_plain_mean_pooling():
    assert compare(masked=True) <= 1e-6
    assert compare(masked=False) > 0.01


def test_the_padding_id_comes_from_a_mask_when_no_embedding_names_it():
    tokens = torch.tensor([[3, 4, 9, 9], [1, 2, 3, 9]])
    model = nn.Sequential(nn.Embedding(10, 4))
    assert padding_id(model, (tokens, tokens != 9), {}, tokens) == (9, "the mask passed with the tokens")
    assert padding_id(model, (tokens, torch.tensor([2, 3])), {}, tokens)[0] is None  # no row as long as the batch
    assert padding_id(model, (tokens, torch.tensor([2, 4])), {}, tokens) == (9, "the lengths passed with the tokens")
    assert padding_id(model, (tokens, torch.tensor([1, 4])), {}, tokens)[0] is None  # past 1: 4, 9, 9
