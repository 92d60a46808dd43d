"""epoch-order: the judge on hand-made observations, and the order record on hand-made index batches (no training)."""
from __future__ import annotations

from checker.events import Order
from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.instrument import KEPT_INDEX_BATCHES, record
from checker.probes import epoch_order


def dataset(passes=4, compared=3, repeated=0, items=512, name="Points", sampler="RandomSampler", shuffles=None,
            fresh=0, unsure=0, spread=None, shuffled=None, stream=False, varied=0):
    return {"dataset": name, "sampler": sampler, "shuffles": shuffles, "stream": stream, "passes": passes,
            "items": items, "compared": compared, "repeated": repeated, "fresh": fresh, "unsure": unsure,
            "varied": varied,
            "spread": spread, "shuffled": shuffled, "classes": 4 if spread is not None else 0}


def judge(*datasets, unordered=(), loaders=True):
    return epoch_order.judge(epoch_order.Observation(list(datasets), list(unordered), loaders), RunFacts())


def order(*batches) -> Order:
    found = Order()
    for batch in batches:
        record(found, batch)
    return found


def test_a_fixed_order_of_representative_batches_is_advice_and_the_symptom_names_no_cause():
    finding = judge(dataset(repeated=3, sampler="SequentialSampler", spread=0.12, shuffled=0.13))
    assert finding.status == ADVICE and "SequentialSampler" in finding.message
    assert finding.observed.startswith("the training batches of Points came in the same order in all 4 passes over "
                                       "its 512 items; the batches look like the whole set")
    for word in ("shuffl", "sampler", "Sampler", "permut", "random"):
        assert word not in finding.observed
    assert judge(dataset(repeated=3, sampler="SequentialSampler")).status == ADVICE  # no labels to tell


def test_labels_in_a_fixed_order_whose_inputs_differ_each_pass_are_said_to_be_so():
    """Pairs drawn anew on every access, labelled by the index's parity (a siamese matcher): the labels repeat,
    the inputs do not, and the advice says exactly that."""
    finding = judge(dataset(repeated=3, varied=3, sampler="SequentialSampler", spread=0.02, shuffled=0.1))
    assert finding.status == ADVICE
    assert finding.observed.startswith("the training batches of Points served their labels in the same order in all "
                                       "4 passes over its 512 items (their inputs differed each pass")


def test_a_fixed_order_fails_when_its_batches_are_unrepresentative_or_its_sampler_says_it_shuffles():
    sorted_by_class = judge(dataset(repeated=3, sampler="SequentialSampler", spread=0.71, shuffled=0.11))
    assert sorted_by_class.status == FAIL and "0.71" in sorted_by_class.observed
    assert judge(dataset(repeated=3, spread=0.2, shuffled=0.11)).status == ADVICE  # within twice, or 0.1, of shuffled
    unseeded = judge(dataset(repeated=3, sampler="DistributedSampler", shuffles=True, spread=0.1, shuffled=0.1))
    assert unseeded.status == FAIL and "set_epoch" in unseeded.message


def test_a_new_order_every_epoch_passes_and_so_do_new_items_at_the_same_indices():
    finding = judge(dataset(), dataset(passes=2, compared=1, name="Other"))
    assert finding.status == PASS and finding.measured == "0 of 4 epochs repeated"
    pairs = judge(dataset(sampler="SequentialSampler", fresh=3))
    assert pairs.status == PASS and "draws new items on each access" in pairs.message


def test_some_repeats_too_few_items_or_unlabelled_new_values_cannot_tell():
    mixed = judge(dataset(repeated=1))
    assert mixed.status == CANNOT_TELL and "1 of 3 passes" in mixed.message
    short = judge(dataset(compared=0, items=4))
    assert short.status == CANNOT_TELL and "too few indices" in short.message
    augmented = judge(dataset(sampler="SequentialSampler", unsure=3))
    assert augmented.status == CANNOT_TELL and "augmentation" in augmented.message


def test_not_applicable_with_one_pass_a_stream_that_does_not_repeat_or_no_loader():
    assert "one pass" in judge(dataset(passes=1, compared=0)).message
    stream = judge(dataset(name="PointStream", stream=True, compared=3, fresh=0), unordered=["PointStream"])
    assert stream.status == NOT_APPLICABLE and "IterableDataset (PointStream)" in stream.message
    repeating = judge(dataset(name="PointStream", stream=True, compared=3, repeated=3), unordered=["PointStream"])
    assert repeating.status == ADVICE  # a stream that serves the same items in the same order every pass
    assert "no DataLoader fed training" in judge(loaders=False).message
    assert judge().status == NOT_APPLICABLE


def test_the_spread_of_a_sorted_order_is_far_above_a_shuffled_one():
    batches = [[c] * 8 for c in range(4) for _ in range(4)]  # class-sorted: every batch one class
    assert epoch_order.spread(batches) == 0.75
    assert epoch_order.shuffled_spread(batches) < 0.4
    assert epoch_order.spread([[0, 1, 2, 3] * 2] * 8) == 0.0


def test_orders_compare_by_digest_and_an_early_stop_by_the_first_batches():
    same = order(list(range(8)), list(range(8, 16)))
    assert epoch_order.same_order(same, order(list(range(8)), list(range(8, 16)))) is True
    assert epoch_order.same_order(same, order(list(range(8, 16)), list(range(8)))) is False
    assert epoch_order.same_order(same, order(list(range(8)), list(range(8, 12)))) is False  # its 2nd batch differs
    assert epoch_order.same_order(same, order(list(range(8)))) is None  # 8 indices in common: too few
    long = order(*[list(range(k, k + 4)) for k in range(0, 64, 4)])
    stopped = order(*[list(range(k, k + 4)) for k in range(0, 32, 4)])
    assert len(long.head) == KEPT_INDEX_BATCHES and epoch_order.same_order(long, stopped) is True
    assert epoch_order.same_order(order([3]), order([3])) is None


def test_index_batches_of_any_kind_are_recorded_as_integers():
    import torch

    from_tensors = order(torch.tensor([2, 0, 1]), [torch.tensor(5), torch.tensor(4)], 7)
    assert from_tensors.head == [[2, 0, 1], [5, 4], [7]] and from_tensors.indices == 6 and from_tensors.batches == 3
    assert order(["a", "b"]).head == [["'a'", "'b'"]]
