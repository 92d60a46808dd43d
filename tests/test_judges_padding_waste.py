"""padding-waste: the judge on hand-made batch records, and the batch reading on hand-made tensors (no training)."""
from __future__ import annotations

import random

import torch

from checker.facts import RunFacts
from checker.findings import ADVICE, NOT_APPLICABLE, PASS
from checker.probes import padding_waste as pw


def random_lengths(n, low=4, high=24, seed=0):
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(n)]


def batches(lengths, size, width=None, grouped=False, multiple=1):
    """[width, lengths] per batch: random batches, or batches sorted by length (grouped)."""
    order = sorted(lengths) if grouped else list(lengths)
    out = []
    for i in range(0, len(order), size):
        rows = order[i:i + size]
        w = width or -(-max(rows) // multiple) * multiple
        out.append([w, rows])
    return out


def judge(*passes, pad=0, source="padding_idx", token_batches=True, loaders=True):
    loader = {"pad": pad, "source": source, "passes": list(passes)}
    obs = pw.Observation([loader] if passes else [], token_batches, loaders)
    return pw.judge(obs, RunFacts())


LENGTHS = random_lengths(768)


def test_each_batch_padded_to_its_longest_and_grouped_passes():
    finding = judge(batches(LENGTHS, 32, grouped=True), batches(LENGTHS, 32, grouped=True))
    assert finding.status == PASS, finding.message


def test_a_global_width_fails_when_batches_are_grouped():
    finding = judge(batches(LENGTHS, 32, width=24, grouped=True))
    assert finding.status == ADVICE and "beyond the width each batch needs" in finding.message
    assert "global" not in finding.observed and "pad_sequence" not in finding.observed


def test_a_global_width_costs_nothing_when_every_random_batch_reaches_it_and_grouping_is_judged_instead():
    finding = judge(batches(LENGTHS, 32, width=24))
    assert finding.status == ADVICE and "Grouping by length would need" in finding.message


def test_widths_rounded_up_to_a_multiple_of_8_pass_and_to_64_fail():
    assert judge(batches(LENGTHS, 32, grouped=True, multiple=8)).status == PASS
    assert judge(batches(LENGTHS, 32, grouped=True, multiple=64)).status == ADVICE


def test_random_batches_of_widely_varying_lengths_fail_against_the_grouped_figure():
    finding = judge(batches(LENGTHS, 32))
    assert finding.status == ADVICE
    assert "grouped 7.9 %" in finding.measured and len(finding.series["padded"]) == 24
    assert min(finding.series["own_longest"]) > 0.2


def test_random_batches_of_similar_lengths_pass():
    assert judge(batches(random_lengths(384, 10, 19), 32)).status == PASS  # a tutorial's data: ~23 % vs ~5 %


def test_a_dataset_too_small_for_grouping_to_help_passes():
    assert judge(batches(random_lengths(24), 32)).status == PASS  # one batch: grouping cannot change it


def test_every_sequence_the_same_length_is_not_applicable():
    assert judge(batches([16] * 64, 8)).status == NOT_APPLICABLE


def test_premises_no_tokens_no_loader_no_padding_id():
    assert judge(token_batches=False).status == NOT_APPLICABLE
    assert judge(token_batches=False, loaders=False).status == NOT_APPLICABLE
    assert judge().status == NOT_APPLICABLE  # no padding found: fixed-length sequences


def test_the_grouped_figure_is_deterministic():
    assert pw.grouped_share(LENGTHS, 32) == pw.grouped_share(list(LENGTHS), 32)


def test_rows_are_read_along_the_batch_dimension_whatever_the_layout():
    tokens = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0], [5, 0, 0, 0]])
    assert pw.measure(tokens, 0, 3) == [4, [3, 2, 1]]
    assert pw.measure(tokens.T.contiguous(), 0, 3) == [4, [3, 2, 1]]  # time-major, told by the labels' count
    assert pw.measure(tokens, 0, None) == [4, [3, 2, 1]]
    left = torch.tensor([[0, 5, 6, 7], [0, 0, 5, 6]])  # left padding
    assert pw.measure(left, 0, 2) == [4, [3, 2]]


def test_the_padding_id_comes_from_a_mask_then_the_embedding_then_trailing_runs():
    tokens = torch.tensor([[5, 6, 7, 9], [5, 6, 9, 9]])
    keep = tokens != 9
    assert pw.padding_id([(0, tokens, keep, 2)], []) == (9, "mask")
    assert pw.padding_id([(0, tokens, ~keep, 2)], []) == (9, "mask")  # a key padding mask: True on padding
    assert pw.padding_id([(0, tokens, None, 2)], [9]) == (9, "padding_idx")
    assert pw.padding_id([(0, tokens, None, 2)], [0]) == (9, "trailing")
