"""epoch-order and label-alignment where their premises do not hold: each says so, and never fails.

Pins, for each shape of data pipeline these two probes read or refuse to read, the status they must give.
"""
from __future__ import annotations

import pytest
from conftest import FIXTURES, ROOT

from checker.findings import CANNOT_TELL, NOT_APPLICABLE, PASS

CORPUS = ROOT / "tests" / "corpus"
PREMISES = [
    # an IterableDataset: no sampler, no index order, no stored labels
    (FIXTURES / "epoch_order__iterable_stream.py", "epoch-order", NOT_APPLICABLE),
    (FIXTURES / "epoch_order__iterable_stream.py", "label-alignment", NOT_APPLICABLE),
    # batches sliced from tensors, no DataLoader
    (CORPUS / "lm_sliced_accum.py", "epoch-order", NOT_APPLICABLE),
    (CORPUS / "lm_sliced_accum.py", "label-alignment", NOT_APPLICABLE),
    # items kept as Python objects: the labels' source is out of sight
    (FIXTURES / "label_alignment__fix_pairs_list.py", "label-alignment", NOT_APPLICABLE),
    (CORPUS / "hf_dataclass.py", "label-alignment", NOT_APPLICABLE),
    # flips, noise and a normalising transform inside __getitem__: inputs still matched to their stored rows
    (CORPUS / "cifar_compose.py", "label-alignment", PASS),
    # labels served one-hot, and inputs and labels read at one shifted index: aligned
    (FIXTURES / "label_alignment__fix_one_hot.py", "label-alignment", PASS),
    (FIXTURES / "label_alignment__fix_shift_both.py", "label-alignment", PASS),
    # continuous regression targets: no value repeats, so a mismatch could not show
    (CORPUS / "regression.py", "label-alignment", CANNOT_TELL),
    # sampling with replacement and a DistributedSampler told the epoch draw a new order each time
    (FIXTURES / "epoch_order__fix_replacement.py", "epoch-order", PASS),
    (FIXTURES / "epoch_order__fix_distributed_set_epoch.py", "epoch-order", PASS),
]


@pytest.fixture(scope="module")
def reports(checked):
    scripts = sorted({script for script, _, _ in PREMISES})
    return dict(zip(scripts, checked(*scripts)))


@pytest.mark.parametrize(("script", "probe", "status"), PREMISES,
                         ids=[f"{s.stem}-{p}" for s, p, _ in PREMISES])
def test_a_premise_that_does_not_hold_is_said_never_failed(script, probe, status, reports):
    finding = next(f for f in reports[script].findings if f.probe == probe)
    assert finding.status == status, finding.message
