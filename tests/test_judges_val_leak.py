"""val-leak: fingerprints of stored items, the comparison against the training items' own repeats, and the judge on
what loaders showed; the checked fixtures (tests/fixtures/val_leak__*.py) run it end to end."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import ConcatDataset, Dataset, TensorDataset

from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes.val_leak import Observation, compare, judge, store_of, table_prints


def test_equal_rows_have_equal_fingerprints_whatever_the_view_and_different_rows_differ():
    x = torch.randn(300, 7, generator=torch.Generator().manual_seed(0))
    prints = table_prints(x)
    assert len(set(prints)) == 300
    assert table_prints(x[100:]) == prints[100:]  # a view at another offset
    assert table_prints(x.t().contiguous().t()) == prints  # another memory layout
    assert table_prints(x.clone()) == prints
    nudged = x.clone()
    nudged[5, 3] = torch.nextafter(nudged[5, 3], torch.tensor(1.0))  # one bit of one value
    assert [a == b for a, b in zip(table_prints(nudged), prints)].count(False) == 1
    images = torch.randint(0, 256, (20, 3, 5, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    assert table_prints(images[::2]) == table_prints(images)[::2]  # rows of 75 bytes: padded to whole words
    assert len(set(table_prints(torch.zeros(4, 3, dtype=torch.bool)))) == 1


class Texts(Dataset):
    def __init__(self, texts, labels):
        self.texts, self.labels = texts, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.texts[i], self.labels[i]


class LabelsOnly(Dataset):
    def __init__(self, paths, labels):
        self.paths, self.labels = paths, labels  # inputs read from files: out of sight

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        raise NotImplementedError


class Arrays(Dataset):
    def __init__(self, images, labels, ids):
        self.images, self.labels, self.ids = images, labels, ids

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def test_the_store_is_the_widest_per_item_input_never_the_labels():
    x, y = torch.randn(50, 6), torch.randint(0, 3, (50,))
    assert store_of(TensorDataset(x, y))["source"] == "TensorDataset.tensors[0]"
    texts = store_of(Texts([f"review {i}" for i in range(50)], y))
    assert texts["source"] == "Texts.texts" and len(set(texts["prints"])) == 50
    assert store_of(LabelsOnly([f"{i}.png" for i in range(50)], y))["source"] == "LabelsOnly.paths"  # names of files
    assert not store_of(LabelsOnly(list(range(50)), y))["source"]  # one number per item: no input in sight
    assert not store_of(TensorDataset(torch.randn(50)))["source"]  # real numbers alone: targets? inputs? not judged
    one_feature = store_of(TensorDataset(torch.randn(50, 1), torch.randn(50, 1)))  # a regression on one feature
    assert one_feature["source"] == "TensorDataset.tensors[0]" and len(set(one_feature["prints"])) == 50
    folder = store_of(LabelsOnly([(f"cats/{i}.png", 0) for i in range(25)] + [(f"dogs/{i}.png", 1) for i in range(25)], y))
    assert folder["source"] == "LabelsOnly.paths" and len(set(folder["prints"])) == 50  # ImageFolder.samples
    images = np.random.default_rng(0).integers(0, 256, (50, 4, 4, 3), dtype=np.uint8)
    arrays = store_of(Arrays(images, y.numpy(), torch.arange(50)))
    assert arrays["source"] == "Arrays.images" and len(set(arrays["prints"])) == 50
    volumes = [(np.full((2, 2), i % 25, dtype=np.float32), np.zeros(2), {"id": i % 25}) for i in range(50)]
    records = store_of(Texts(volumes, y))  # a list of (image, mask, meta) records
    assert records["source"] == "Texts.texts" and len(set(records["prints"])) == 25
    reviews = store_of(Texts([(i % 2, f"review {i % 20}") for i in range(50)], y))  # (label, text) records
    assert reviews["source"] == "Texts.texts" and len(set(reviews["prints"])) == 20
    pairs = store_of(Texts([(i % 3, torch.arange(i % 9 + 1)) for i in range(50)], y))  # (label, tokens) records
    assert pairs["source"] == "Texts.texts" and len(set(pairs["prints"])) == 9
    listed = store_of([(torch.full((3,), float(i % 10)), i % 2) for i in range(50)])  # a list given as the dataset
    assert listed["source"] == "list.items" and len(set(listed["prints"])) == 10
    parts = [TensorDataset(torch.arange(40.0).reshape(20, 2), torch.zeros(20)), TensorDataset(torch.arange(40.0).reshape(20, 2))]
    joined = store_of(ConcatDataset(parts))  # the second part repeats the first, item for item
    assert joined["prints"] == table_prints(torch.arange(40.0).reshape(20, 2)) * 2
    assert not store_of(ConcatDataset([*parts, LabelsOnly(list(range(5)), torch.zeros(5))]))["source"]
    ragged = store_of(Texts([torch.arange(i % 7 + 2) for i in range(50)], y))
    assert ragged["source"] == "Texts.texts" and len(set(ragged["prints"])) == 7


class Lazy:
    """An array-like that reads its rows from disk when asked (an HDF5 dataset, a zarr array), counting the reads."""

    shape, dtype = (300_000, 1024), np.dtype("float32")  # 1.2 GB, were it read
    reads = 0

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, i):
        Lazy.reads += 1
        raise OSError("a read from disk")

    def __array__(self, *args, **kwargs):
        Lazy.reads += 1
        raise OSError("a read of everything from disk")


def test_a_lazy_array_larger_than_the_limit_is_never_read():
    class Stored(Dataset):
        def __init__(self):
            self.images, self.labels = Lazy(), torch.zeros(300_000)

        def __len__(self):
            return 300_000

    assert not store_of(Stored())["source"] and Lazy.reads == 0


def row(prints, source="TensorDataset.tensors[0]"):
    return {"dataset": "TensorDataset", "source": source, "items": len(prints), "why": "", "prints": prints}


def test_shared_items_are_held_against_the_training_items_own_repeats():
    train = row(list(range(512)))
    leaked = compare([train], row(list(range(400, 656))))
    assert (leaked["shared"], leaked["repeats"], leaked["leaks"]) == (112, 0.0, True)
    assert not compare([train], row(list(range(512, 768))))["leaks"]
    assert not compare([train], row(list(range(500, 756))))["leaks"]  # 12 shared: too few to mean anything
    # a table whose rows repeat: 40 % of the training items have a twin among them, and as many held-out ones do
    repeated = row([i % 360 for i in range(512)])
    assert compare([repeated], row([i % 360 for i in range(100, 356)] + [1000 + i for i in range(170)]))["leaks"] is False
    assert compare([repeated], row([i % 360 for i in range(256)]))["leaks"] is True  # every one of them shared
    rebuilt = compare([train, row(list(range(512)))], row(list(range(512, 768))))  # the same set built twice
    assert rebuilt["repeats"] == 0.0 and rebuilt["train_items"] == 512


def evaluation(train_prints, held_prints, own=False, source="TensorDataset.tensors[0]"):
    held = row(held_prints, source)
    return {key: held[key] for key in ("dataset", "source", "items", "why")} | {"own": own} \
        | ({} if own else compare([row(train_prints)], held))


def unread(why="ImageFolder stores no inputs", own=False):
    return {"dataset": "", "source": "", "items": 0, "why": why, "own": own}


def test_the_judge_fails_a_shared_evaluation_and_passes_a_held_out_one():
    train = list(range(512))
    obs = Observation([row(train)], [evaluation(train, list(range(300, 556)))])
    finding = judge(obs, RunFacts())
    assert finding.status == FAIL and "212 of the 256 items" in finding.message and "83%" in finding.observed
    clean = judge(Observation([row(train)], [evaluation(train, list(range(600, 856)))]), RunFacts())
    assert clean.status == PASS and clean.message.startswith("0 of 256 held-out items")


def test_an_evaluation_of_the_training_items_themselves_is_a_training_accuracy_advised_when_it_is_all_there_is():
    train = list(range(512))
    alone = judge(Observation([row(train)], [evaluation(train, train, own=True)]), RunFacts())
    assert alone.status == ADVICE and alone.observed.startswith("every item evaluated is a training item")
    again = Observation([unread()], [], reevaluated=3)  # the training loader itself, evaluated: readable or not
    assert judge(again, RunFacts()).status == ADVICE
    beside_unread = Observation([row(train)], [evaluation(train, train, own=True), unread()])  # a held-out set?
    assert judge(beside_unread, RunFacts()).status == NOT_APPLICABLE
    copy_beside_held_out = Observation([row(train)], [evaluation(train, train), evaluation(train, list(range(600, 856)))])
    finding = judge(copy_beside_held_out, RunFacts())
    assert finding.status == PASS and "training accuracy, not counted" in finding.message
    within_beside = Observation([row(train)], [evaluation(train, train[::5]), evaluation(train, list(range(600, 856)))])
    assert judge(within_beside, RunFacts()).status == FAIL  # validation inside the training set, a test set apart
    copy_alone = Observation([row(train)], [evaluation(train, train)])  # a separate copy is all that is evaluated
    assert judge(copy_alone, RunFacts()).status == FAIL


@pytest.mark.parametrize(("training", "evaluations", "status"), [
    ([], [], NOT_APPLICABLE),
    ([{"dataset": "", "source": "", "items": 0, "why": "ImageFolder stores no inputs"}], [], NOT_APPLICABLE),
    ([row(list(range(10)))], [], NOT_APPLICABLE),
])
def test_without_readable_training_items_or_an_evaluation_it_does_not_judge(training, evaluations, status):
    assert judge(Observation(training, evaluations), RunFacts()).status == status


def test_a_training_set_that_mostly_repeats_itself_cannot_be_judged_by_its_items():
    train = [i % 100 for i in range(512)]
    finding = judge(Observation([row(train)], [evaluation(train, [i % 100 for i in range(256)])]), RunFacts())
    assert finding.status == CANNOT_TELL and "100% of the training items repeat" in finding.message
