"""label-leak: the one-to-one test on batches as a run would feed them (Stream.read_batch), and the judge on what
streams showed; the checked fixtures (tests/fixtures/label_leak__*.py) run it end to end."""
from __future__ import annotations

import torch

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes.label_leak import Observation, Stream, judge


def batches(n: int = 4, size: int = 32, classes: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        y = torch.randint(classes, (size,), generator=g)
        yield torch.randn(size, 6, generator=g), y


def streamed(edit, n: int = 4, size: int = 32, classes: int = 4) -> Stream:
    stream = Stream("Net", training=False)
    stream.forwards = [0]
    for x, y in batches(n, size, classes):
        if stream.done:  # as the observer does: a stream with no candidate left is not read again
            break
        stream.read_batch(edit(x, y), y)
    return stream


def leak_into(column: int, encode=lambda y: y.double()):
    def edit(x, y):
        x = x.clone()
        x[:, column] = encode(y).to(x.dtype)
        return x
    return edit


def test_a_column_with_one_value_per_class_stays_a_candidate_and_real_features_drop_out_at_once():
    stream = streamed(leak_into(2, lambda y: 10 + 3 * y.double()))
    assert stream.candidates.tolist() == [2] and stream.samples == 128
    summary = stream.summary({0})
    assert summary["leaks"] == [2] and summary["values"] == {"0": 10.0, "1": 13.0, "2": 16.0, "3": 19.0}
    clean = streamed(lambda x, y: x)
    assert clean.candidates.tolist() == [] and clean.done and clean.read == 1  # nothing left to read after one batch


def test_shared_values_constant_columns_and_a_class_split_over_two_values_are_no_copy():
    def edit(x, y):
        x = x.clone()
        x[:, 0] = 0.0  # padding: one value for every class
        x[:, 1] = (y >= 2).double()  # two classes per value
        x[:, 2] = y.double() + (torch.arange(len(y)) % 2)  # two values per class
        return x
    assert streamed(edit).candidates.tolist() == []


def test_a_label_that_changes_its_value_between_batches_is_no_copy():
    calls = []

    def drifting(x, y):  # each batch writes the label in other units: within a batch one-to-one, across batches not
        calls.append(1)
        return leak_into(5, lambda y: y.double() * len(calls))(x, y)
    assert streamed(drifting).candidates.tolist() == []


def test_the_judge_fails_a_scored_stream_that_kept_a_copy_and_says_so_without_naming_it_at_the_symptom_level():
    stream = streamed(leak_into(4)).summary({0})
    finding = judge(Observation([stream]), RunFacts())
    assert finding.status == FAIL and "feature 4 of the 6" in finding.message and "label" in finding.message
    assert "feature 4" not in finding.observed and "label" not in finding.observed
    assert judge(Observation([{**stream, "scored": False}]), RunFacts()).status == NOT_APPLICABLE


def test_too_few_samples_cannot_tell_and_a_clean_stream_passes():
    few = streamed(leak_into(4), n=1, size=16).summary({0})  # 16 samples of up to 4 classes
    assert judge(Observation([few]), RunFacts()).status == CANNOT_TELL
    clean = streamed(lambda x, y: x).summary({0})
    finding = judge(Observation([clean]), RunFacts())
    assert finding.status == PASS and "32 labelled samples" in finding.message
    assert judge(Observation([], unread="inputs of 3072 features (more than 4096) are not read"),
                 RunFacts()).status == NOT_APPLICABLE


def test_a_rare_class_seen_once_is_no_evidence_of_a_copy():
    """500 negatives without the flag and one positive with it: one value per class, by the lone positive's luck."""
    stream = Stream("Net", training=True)
    stream.forwards = [0]
    g = torch.Generator().manual_seed(0)
    for batch in range(8):
        y = torch.zeros(64, dtype=torch.long)
        x = torch.randn(64, 5, generator=g)
        x[:, 4] = 0.0
        if batch == 3:
            y[10], x[10, 4] = 1, 1.0
        stream.read_batch(x, y)
    seen = stream.summary({0})
    assert seen["leaks"] == [4] and (seen["often"], seen["classes"]) == (1, 2)
    finding = judge(Observation([seen]), RunFacts())
    assert finding.status == CANNOT_TELL and "lone sample" in finding.message
