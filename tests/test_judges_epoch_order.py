"""epoch-order: the judge on hand-made observations, and the order record on hand-made index batches (no training)."""
from __future__ import annotations

from checker.events import Order
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.instrument import KEPT_INDEX_BATCHES, record
from checker.probes import epoch_order


def dataset(passes=4, compared=3, repeated=0, items=512, name="Points", sampler="RandomSampler"):
    return {"dataset": name, "sampler": sampler, "passes": passes, "items": items, "compared": compared,
            "repeated": repeated}


def judge(*datasets, unordered=(), loaders=True):
    return epoch_order.judge(epoch_order.Observation(list(datasets), list(unordered), loaders), RunFacts())


def order(*batches) -> Order:
    found = Order()
    for batch in batches:
        record(found, batch)
    return found


def test_the_same_order_in_every_epoch_fails_and_the_symptom_names_no_cause():
    finding = judge(dataset(repeated=3, sampler="SequentialSampler"))
    assert finding.status == FAIL and "SequentialSampler" in finding.message
    assert finding.observed == ("the training batches of Points came in the same order in all 4 passes over its "
                                "512 items")
    for word in ("shuffl", "sampler", "Sampler", "permut", "random"):
        assert word not in finding.observed


def test_a_new_order_every_epoch_passes():
    finding = judge(dataset(), dataset(passes=2, compared=1, name="Other"))
    assert finding.status == PASS and finding.measured == "0 of 4 epochs repeated"


def test_some_repeats_or_too_few_items_cannot_tell():
    mixed = judge(dataset(repeated=1))
    assert mixed.status == CANNOT_TELL and "1 of 3 passes" in mixed.message
    short = judge(dataset(compared=0, items=4))
    assert short.status == CANNOT_TELL and "too few indices" in short.message


def test_not_applicable_with_one_pass_an_iterable_dataset_or_no_loader():
    assert "one pass" in judge(dataset(passes=1, compared=0)).message
    stream = judge(unordered=["PointStream"])
    assert stream.status == NOT_APPLICABLE and "IterableDataset (PointStream)" in stream.message
    assert "no DataLoader fed training" in judge(loaders=False).message
    assert judge().status == NOT_APPLICABLE


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
