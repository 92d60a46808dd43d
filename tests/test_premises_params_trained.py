"""params-trained keeps to its premises: on scripts whose parameters get gradients without an optimizer holding
them all, or are updated another way, it passes rather than staying silent as n/a; on other probes' bugs it says
nothing new. Run scripts are shared with test_corpus.py and test_fixtures.py through the session's cache."""
from __future__ import annotations

import pytest
from conftest import FIXTURES, ROOT

from checker.findings import NOT_APPLICABLE, PASS

CORPUS = ROOT / "tests" / "corpus"
PREMISES = [
    (CORPUS / "lstm_manual_sgd.py", PASS),  # updates by hand, no torch.optim
    (CORPUS / "dcgan.py", PASS),  # the discriminator graded by the generator's loss
    (CORPUS / "distill.py", PASS),  # a teacher trained first, then run under no_grad
    (CORPUS / "ema.py", PASS),  # an EMA copy updated under no_grad
    (CORPUS / "simclr.py", PASS),  # a frozen encoder feeding a trained linear probe
    (CORPUS / "compiled_fullgraph.py", PASS),  # no module hooks inside compiled code
    (CORPUS / "grad_checkpoint.py", PASS),  # blocks recomputed inside backward
    (FIXTURES / "updates_applied__broken.py", NOT_APPLICABLE),  # no step: no update follows a gradient
    (FIXTURES / "gradient_flow__broken.py", PASS),  # a detached branch gets no gradient: nothing to judge there
]


@pytest.fixture(scope="module")
def reports(checked):
    scripts = [script for script, _ in PREMISES]
    return dict(zip(scripts, checked(*scripts)))


@pytest.mark.parametrize(("script", "status"), PREMISES, ids=lambda v: getattr(v, "stem", v))
def test_params_trained_keeps_to_its_premises(script, status, reports):
    finding = next(f for f in reports[script].findings if f.probe == "params-trained")
    assert finding.status == status, finding.message
