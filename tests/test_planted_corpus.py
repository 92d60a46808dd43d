"""The sequence bugs, planted by their operators into corpus scripts written unlike the references, trip their
probes there: course authors plant katas in their own scripts, so an operator's site must be a real bug wherever
it is found.

The bugs are those the sequence references (``text``, ``lm``) have and the fixed-width ones do not; the scripts
are the corpus's sequence models (an HF-style tokenizer pipeline, a nanoGPT-style trainer, a word-language model
updated by hand, a slot tagger over packed sequences, a Kim-style CNN resumed from a checkpoint, an HF-style
causal LM that shifts its labels inside its forward, ...). Each
planted script may fail, besides the bug's probes, only the health gate and what its correct original fails.
"""
from __future__ import annotations

import hashlib

import pytest
from conftest import REFERENCES, check_all, failed_probes, plant_all, verdict_for
from test_corpus import CORPUS
from test_fixtures import expected

from katas.bugs import BUGS
from katas.engine.context import Context
from katas.engine.inject import sites

SCRIPTS = [CORPUS / f"{name}.py" for name in ("cnn_text_preempted", "hf_causal_lm", "hf_dataclass", "hf_tokenizer_gru",
                                             "joint_slots", "lm_sliced_accum", "lstm_manual_sgd", "token_transformer")]


def _sequence_bugs() -> list:
    refs = {p.stem: Context.of(p.read_text()) for p in REFERENCES.glob("*.py")}
    sequence = [refs[name] for name in ("text", "lm")]
    fixed = [refs[name] for name in ("classifier", "binary")]
    return [bug for bug in BUGS.values()
            if any(sites(bug, ctx) for ctx in sequence) and not any(sites(bug, ctx) for ctx in fixed)]


BUGS_OF_SEQUENCES = _sequence_bugs()
CASES = [(script, bug) for script in SCRIPTS for bug in BUGS_OF_SEQUENCES if sites(bug, Context.of(script.read_text()))]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    paths = {}
    for (script, bug), source in zip(CASES, plant_all([(bug.id, script, 0) for script, bug in CASES])):
        path = folder / f"{script.stem}__{bug.id}-{hashlib.sha1(source.encode()).hexdigest()[:8]}.py"
        path.write_text(source)
        paths[script, bug.id] = path
    checked = check_all(list(paths.values()))
    return {case: checked[path] for case, path in paths.items()}


def test_every_sequence_bug_is_planted_in_some_corpus_script():
    assert {bug.id for _, bug in CASES} == {bug.id for bug in BUGS_OF_SEQUENCES}


# Sites where the planted line changes or costs nothing here: the check must then not claim the bug either (and
# `kata new --from` refuses such a site, because it verifies that the symptom shows).
INERT = {("lm_sliced_accum", "unscale-clip"): "its GradScaler is enabled only for float16 on CUDA",
         ("hf_tokenizer_gru", "pad-global"): "its GRU runs packed sequences (pack_padded_sequence): padding costs no steps",
         ("hf_tokenizer_gru", "no-grouping"): "its GRU runs packed sequences (pack_padded_sequence): padding costs no steps"}


@pytest.mark.parametrize(("script", "bug"), CASES, ids=lambda v: getattr(v, "id", getattr(v, "stem", v)))
def test_planted_sequence_bug_trips_its_probes(script, bug, reports):
    report = reports[script, bug.id]
    details = "\n".join(f"{f.probe}: {f.status} {f.message}" for f in report.findings)
    if (script.stem, bug.id) in INERT:
        assert report.verdict == "pass" and bug.status(report.statuses()) == "fixed", details
        return
    failed = failed_probes(report)
    assert report.verdict == verdict_for(report) and failed, f"{report.problem}\n{report.detail}\n{details}"
    assert set(bug.probes) <= failed, details
    assert failed <= {*bug.probes, "health", *expected(script)}, details
