"""Scripts written like other people's code: each correct one passes, each hand-planted bug trips exactly its probe.

``tests/corpus/`` holds training scripts in the shapes of public code (a GPT-style
trainer slicing batches, a manual-SGD LSTM, a VAE, a DCGAN, a CIFAR loop with
transforms, the quickstart, ...), written for this project, and variants named
``<script>__<bug>.py`` with one bug planted by hand. First lines follow the
fixtures' ``# expect:`` convention. The second test pins, for each class of
script the checker once got wrong, the status a probe must give there.
"""
from __future__ import annotations

import pytest
from conftest import ROOT
from test_fixtures import assert_as_expected

from checker.findings import CANNOT_TELL, NOT_APPLICABLE, PASS

CORPUS = ROOT / "tests" / "corpus"
SCRIPTS = sorted(CORPUS.glob("*.py"))


@pytest.fixture(scope="module")
def reports(checked):
    return dict(zip(SCRIPTS, checked(*SCRIPTS)))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_corpus_script_fails_exactly_the_expected_probes(script, reports):
    assert_as_expected(script, reports[script])


PREMISES = [
    # batches sliced from a tensor, no DataLoader: phases and batches still observed
    ("lm_sliced_accum", "train-mode", PASS),
    ("lm_sliced_accum", "eval-mode", PASS),
    ("lm_sliced_accum", "gradient-flow", PASS),
    ("lm_sliced_accum", "health.updates-every-batch", PASS),
    ("lm_sliced_accum", "clip-order", PASS),
    # updates by hand, no torch.optim
    ("lstm_manual_sgd", "health.training-ran", PASS),
    ("lstm_manual_sgd", "grads-accumulate", PASS),
    ("lstm_manual_sgd", "clip-order", PASS),
    ("lstm_manual_sgd", "non-finite", PASS),
    # the last batch's loss kept on the trainer through an evaluation callback
    ("while_trainer_callback", "graphs-retained", PASS),
    # the generator's backward leaves gradients in the discriminator, cleared before its next backward
    ("dcgan", "grads-accumulate", PASS),
    ("dcgan", "health.loss-falls", NOT_APPLICABLE),
    # T_max=200 stepped per epoch in a 3-epoch run: the horizon says neither
    ("cifar_compose", "lr-schedule", CANNOT_TELL),
    ("lambda_subclass", "lr-schedule", PASS),  # a LambdaLR subclass whose rate reaches zero at the last step
    ("plateau", "lr-schedule", PASS),
    # not classifiers: no ln(k), no accuracy
    ("vae", "health.val-accuracy", NOT_APPLICABLE),
    ("regression", "health.initial-loss", NOT_APPLICABLE),
    ("regression", "health.val-accuracy", NOT_APPLICABLE),
    # a generator held by a transform inside a Compose inside the dataset
    ("cifar_compose", "worker-rng", PASS),
    # no model.train() at all: a model without dropout or batch-norm
    ("quickstart", "train-mode", NOT_APPLICABLE),
    # a frozen encoder in eval mode, under no_grad, feeding a trained linear probe
    ("simclr", "train-mode", PASS),
    # stages one after another (a teacher, then a student): each updater's own loss falls
    ("distill", "health.loss-falls", PASS),
    # two independent models, each with its optimizer: not adversarial, both losses judged
    ("two_optimizers", "health.loss-falls", PASS),
    # a Wasserstein critic and its generator are adversarial
    ("wgan_gp", "health.loss-falls", NOT_APPLICABLE),
    # a batch fetched and dropped by `break` is not due an update
    ("early_stop", "health.updates-every-batch", PASS),
    # activation checkpointing re-runs blocks inside backward: not evaluation
    ("grad_checkpoint", "eval-mode", PASS),
    # the model returns a dataclass: its graph is still found
    ("hf_dataclass", "graphs-retained", PASS),
    ("hf_dataclass", "train-mode", PASS),
    # validation computing accuracy from the outputs, while training computes a loss
    ("ema", "health.val-accuracy", PASS),
    # torch.compile(fullgraph=True): the checker's hooks add no guards inside compiled code
    ("compiled_fullgraph", "train-mode", PASS),
]


@pytest.mark.parametrize(("name", "probe", "status"), PREMISES, ids=lambda v: str(v))
def test_probes_keep_to_their_premises(name, probe, status, reports):
    report = reports[CORPUS / f"{name}.py"]
    found = {f.probe: f for f in report.findings} | {p.probe: p for f in report.findings for p in f.parts}
    assert found[probe].status == status, f"{probe}: {found[probe].status} {found[probe].message}"
