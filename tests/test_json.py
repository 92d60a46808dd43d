"""The JSON report's shape: docs/json.md documents it, the code's schema names it, and the reports of a kata (at the
symptoms level and with --diagnose) and of --device cuda without CUDA validate against it. The reports of the other
kinds of run (a pass, a symptom, a crash, a timeout, an unusable file) are validated where they are made, in
test_untrusted.py, and the grades in test_interview.py."""
from __future__ import annotations

import copy
import hashlib
import json

import pytest
from click.testing import CliRunner
from conftest import REFERENCES, ROOT
from documented_json import ALWAYS, DIAGNOSIS, Invalid, documented, validate

from checker.verdict import SCHEMA
from katas.cli import main
from katas.interview.grade import SCHEMA as GRADE_SCHEMA

# The documented shape of each schema version, as a digest of its tables' fields, types and presence: a change
# of shape that does not bump the version fails here. After a change: bump the version (checker/verdict.py and
# docs/json.md, or katas/interview/grade.py), and add the new version's digest below.
SHAPES = {
    SCHEMA: ("report", "probe", "stopped", "prefix", "profile", "kata"),
    GRADE_SCHEMA: ("grade", "score", "time", "bug", "new symptom", "grade error", "ungraded"),
    "torch-katas/grades/1": ("grades",),
}
DIGESTS = {
    "torch-katas/check/5": "89b05d1eefa8d2a7",
    "torch-katas/check/6": "e28f0bc134f61b3c",
    "torch-katas/check/7": "96e1d58a433ff3e7",
    "torch-katas/check/8": "2c7b6267763be8c9",
    "torch-katas/grade/2": "c237b1b8564be2b5",
    "torch-katas/grade/3": "5b38de84d4ac5169",
    "torch-katas/grades/1": "2b82d57ef4caae91",
}


def kata(*args: str):
    return CliRunner().invoke(main, list(args))


def digest(tables: tuple[str, ...]) -> str:
    types = documented()
    rows = [(table, f.name, f.type, f.present) for table in tables for f in types[table].values()]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """`kata check --json` on a kata whose bug is still there, without and with --diagnose, and on --device cuda."""
    folder = tmp_path_factory.mktemp("json")
    made = kata("new", "--from", str(ROOT / "tests" / "engine_samples" / "small_trainer.py"), "--bug", "zero-grad",
                "--no-verify", "--seed", "0", "--dir", str(folder))
    assert made.exit_code == 0, made.output
    runs = {"symptoms": ["--json", str(folder / "01.py")], "diagnose": ["--json", "--diagnose", str(folder / "01.py")],
            "cuda": ["--json", "--device", "cuda", str(REFERENCES / "binary.py")]}
    done = {}
    for name, args in runs.items():
        result = CliRunner().invoke(main, ["check", *args])
        done[name] = (result.exit_code, json.loads(result.stdout))
    return done


def test_the_page_documents_the_schemas_the_code_writes():
    types = documented()
    assert types["report"]["schema"].type == json.dumps(SCHEMA)
    assert types["grade"]["schema"].type == json.dumps(GRADE_SCHEMA) == types["grade error"]["schema"].type
    assert "docs/json.md" in (ROOT / "README.md").read_text() and "json.md" in (ROOT / "docs" / "check.md").read_text()


@pytest.mark.parametrize("schema", sorted(SHAPES))
def test_a_change_of_shape_comes_with_a_new_schema_version(schema):
    assert digest(SHAPES[schema]) == DIGESTS.get(schema), (
        f"the documented shape of {schema} changed: bump the version and record the new digest in DIGESTS")


def test_a_kata_at_the_symptoms_level_validates_and_names_no_probe(reports):
    code, doc = reports["symptoms"]
    validate(doc)
    assert code == doc["exit_code"] == 1 and doc["verdict"] == "fail" and doc["ran"] is True
    assert doc["disclosure"] == "symptoms" and doc["kata"] == {"injected_bug": "still present"}
    failing = [p for p in doc["probes"] if p["status"] == "fail"]
    assert [p["check"] for p in failing][0] == "update-gradient" and failing[0]["observed"]
    assert not any({"probe", "probe_title", "message"} & p.keys() for p in doc["probes"])


def test_a_kata_with_diagnose_validates_and_names_the_probe_and_the_cause(reports):
    code, doc = reports["diagnose"]
    validate(doc)
    assert code == 1 and doc["disclosure"] == "diagnosis"
    symptoms = reports["symptoms"][1]
    # the same checks, in the same order, named alike; the diagnosis adds the probe and its message
    assert [(p["check"], p["title"], p["status"]) for p in doc["probes"]] == \
        [(p["check"], p["title"], p["status"]) for p in symptoms["probes"]]
    failing = next(p for p in doc["probes"] if p["status"] == "fail")
    assert failing["probe"] == "grads-accumulate" and failing["message"] and failing["probe_title"]


def test_cuda_without_cuda_did_not_run(reports):
    code, doc = reports["cuda"]
    validate(doc)
    if doc["verdict"] == "usage":  # a machine without CUDA: nothing ran, and the report says so
        assert code == 2 and doc["ran"] is False and doc["probes"] == [] and "CUDA is not available" in doc["problem"]
    else:  # a machine with CUDA: it ran and was judged
        assert doc["ran"] is True and doc["verdict"] in ("pass", "fail")


def test_the_validator_rejects_what_the_page_does_not_document(reports):
    _, symptoms = reports["symptoms"]
    _, diagnosis = reports["diagnose"]
    for change in (lambda d: d.pop("ran"), lambda d: d.update(extra=1), lambda d: d.update(ran="yes"),
                   lambda d: d.update(exit_code=5), lambda d: d.update(stopped={"epoch": 1}),
                   lambda d: d["probes"][0].update(probe="grads-accumulate"),
                   lambda d: d["probes"][0]["series"].update(loss=[1.0, float("nan")]),
                   lambda d: d["probes"][0].update(parts=None), lambda d: d.update(kata={})):
        doc = copy.deepcopy(symptoms)
        change(doc)
        with pytest.raises(Invalid):
            validate(doc)
    broken = copy.deepcopy(diagnosis)
    broken["probes"][0].pop("message")
    with pytest.raises(Invalid):
        validate(broken)
    assert all(f.present in (ALWAYS, DIAGNOSIS) for f in documented()["probe"].values())
