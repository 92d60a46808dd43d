"""reported-metric and input-scale keep to their premises on scripts of other shapes (runs shared with the suite)."""
from __future__ import annotations

import pytest
from conftest import FIXTURES, ROOT

from checker.findings import CANNOT_TELL, NOT_APPLICABLE, PASS

CORPUS = ROOT / "tests" / "corpus"

PREMISES = [
    # not a classifier: nothing to recompute an accuracy from
    (CORPUS / "regression.py", "reported-metric", NOT_APPLICABLE),
    (CORPUS / "vae.py", "reported-metric", NOT_APPLICABLE),
    # metrics through a logger are not read
    (CORPUS / "lambda_subclass.py", "reported-metric", CANNOT_TELL),
    # a percentage with a count beside it, a training accuracy printed after training, a best accuracy at the end
    (CORPUS / "cifar_compose.py", "reported-metric", PASS),
    # "Accuracy: N/M (P%)", a percentage after a newline, a best accuracy printed in full
    (CORPUS / "mnist_cnn_steplr.py", "reported-metric", PASS),
    (CORPUS / "quickstart.py", "reported-metric", PASS),
    (CORPUS / "while_trainer_callback.py", "reported-metric", PASS),
    # top-2, balanced, F1, best-so-far, per-batch prints inside the evaluation loop
    (FIXTURES / "reported_metric__fix_other_statistics.py", "reported-metric", PASS),
    # token ids into an embedding
    (CORPUS / "lm_sliced_accum.py", "input-scale", NOT_APPLICABLE),
    (FIXTURES / "input_scale__tokens.py", "input-scale", NOT_APPLICABLE),
    # a first layer that normalises raw readings itself; [0, 1] images without Normalize
    (FIXTURES / "input_scale__fix_batchnorm_first.py", "input-scale", PASS),
    (FIXTURES / "input_scale__fix_unit_images.py", "input-scale", PASS),
    # a compiled model (no hooks inside), a generator on noise and a discriminator on images
    (CORPUS / "compiled_fullgraph.py", "input-scale", PASS),
    (CORPUS / "dcgan.py", "input-scale", PASS),
]


@pytest.mark.parametrize(("script", "probe", "status"), PREMISES, ids=lambda v: getattr(v, "stem", v))
def test_probes_keep_to_their_premises(script, probe, status, checked):
    (report,) = checked(script)
    found = {f.probe: f for f in report.findings}
    assert found[probe].status == status, f"{probe}: {found[probe].status} {found[probe].message}"
