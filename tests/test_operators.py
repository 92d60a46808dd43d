"""Operators, structurally: worked examples, before/after fixture pairs, sites, determinism."""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from conftest import REFERENCES

from katas.bugs import BUGS, lookup
from katas.catalogue import UnknownBug
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, sites

PAIRS = sorted((Path(__file__).parent / "operators").glob("*.in.py"))


def bug_of(pair: Path):
    return BUGS[pair.name.split("__")[0].replace("_", "-")]


@pytest.mark.parametrize("bug", BUGS.values(), ids=lambda b: b.id)
def test_worked_examples_are_what_the_operator_does(bug):
    examples = bug.operator.examples()
    assert examples, f"{bug.id} has no worked example"
    for example in examples:
        assert inject(bug, example.before, seed=0).source == example.after


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name.removesuffix(".in.py"))
def test_fixture_pair(pair):
    expected = pair.with_name(pair.name.replace(".in.py", ".out.py")).read_text()
    assert inject(bug_of(pair), pair.read_text(), seed=0).source == expected


def test_every_bug_has_a_fixture_pair_written_unlike_the_references():
    assert {bug_of(p).id for p in PAIRS} == set(BUGS)


@pytest.mark.parametrize("reference", sorted(REFERENCES.glob("*.py")), ids=lambda p: p.stem)
def test_edits_stay_at_the_site(reference):
    """Everything outside the site keeps its text: few changed lines, comments and docstrings intact."""
    source = reference.read_text()
    for bug in BUGS.values():
        for seed in range(3):
            try:
                mutated = inject(bug, source, seed).source
            except NoSite:
                continue
            changed = [line for line in difflib.unified_diff(source.splitlines(), mutated.splitlines(), n=0, lineterm="")
                       if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            assert 1 <= len(changed) <= 12, (bug.id, changed)
            assert mutated.count("#") == source.count("#") or bug.id == "worker-seed"


def test_same_input_and_seed_give_the_same_output_and_site_ids_are_descriptive():
    source = (REFERENCES / "classifier.py").read_text()
    detach = lookup("detach")
    first, second = (inject(detach, source, seed=7) for _ in range(2))
    assert first == second
    ids = [s.id for s in sites(detach, Context(source))]
    assert ids == ["detach:Classifier.forward:self.deep(h)", "detach:Classifier.forward:self.shortcut(h)",
                   "detach:Classifier.forward:self.stem(x)"]
    assert {inject(detach, source, seed).site for seed in range(20)} == set(ids)


def test_a_bug_without_a_site_says_why():
    with pytest.raises(NoSite, match=r"`scheduler` does not apply to binary.py: it has no learning-rate scheduler"):
        inject(lookup("scheduler"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


def test_a_mistyped_bug_gets_a_suggestion():
    with pytest.raises(UnknownBug, match="Did you mean `zero-grad`"):
        lookup("zerograd")


def test_roles_come_from_structure_before_names():
    source = "import torch\nthing = torch.optim.SGD(params, lr=0.1)\nsched = 3\n"
    ctx = Context(source)
    import libcst.matchers as m

    names = {n.value: n for n in m.findall(ctx.module, m.Name()) if n.value in ("thing", "sched")}
    assert ctx.role(names["thing"]).kind == "optimizer" and not ctx.role(names["thing"]).guessed
    assert ctx.role(names["sched"]).guessed
