"""pad-targets: the judge on hand-made observations."""
from __future__ import annotations

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import pad_targets


def judge(**fields):
    base = dict(model="Tagger", pad=0, pad_source="the embedding's padding_idx")
    return pad_targets.judge(pad_targets.Observation(**{**base, **fields}), RunFacts())


def calls(*ratios):
    n = len(ratios)
    return dict(kinds=["cross_entropy"] * n, ratios=list(ratios), padded=[40] * n, positions=[256] * n,
                target_is_pad=[True] * n)


def test_zero_gradient_on_padded_rows_passes():
    assert judge(**calls(0.0, 0.0, 0.0, 0.0)).status == PASS


def test_padded_rows_trained_like_real_ones_fail_and_the_symptom_names_no_cause():
    finding = judge(**calls(0.0, 0.9, 0.95))
    assert finding.status == FAIL and finding.measured == "0.95"
    assert "ignore_index" in finding.message and "padding id itself" in finding.message
    for word in ("ignore", "mask", "predict padding"):
        assert word not in finding.observed


def test_a_trace_of_gradient_is_undecided():
    assert judge(**calls(0.0, 1e-4)).status == CANNOT_TELL


def test_premises():
    assert judge(model="").status == NOT_APPLICABLE
    assert judge(pad=None, pad_source="no padding id").status == NOT_APPLICABLE
    assert judge().status == NOT_APPLICABLE  # no loss aligned with the tokens
    assert judge(unreached=2).status == CANNOT_TELL


def test_the_padding_id_of_right_padded_rows_is_the_value_that_only_ever_ends_them():
    import torch

    from checker.probes._shared.token_inputs import trailing_pad

    padded = torch.tensor([[5, 6, 7, 1, 0, 0], [5, 1, 0, 0, 0, 0], [4, 4, 4, 4, 4, 1], [8, 9, 1, 0, 0, 0]])
    assert trailing_pad(padded) == 0
    assert trailing_pad(padded.t().contiguous()) == 0  # time-major
    assert trailing_pad(torch.tensor([[5, 6, 7, 1], [5, 3, 2, 1], [4, 4, 4, 1]])) is None  # one EOS each: not padded
    inside = padded.clone()
    inside[2, 0] = 0  # 0 also inside a row: a real token
    assert trailing_pad(inside) is None
    assert trailing_pad(torch.tensor([[5, 0, 0], [6, 0, 0]])) is None  # runs of one length: nothing varies
