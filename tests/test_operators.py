"""Operators, structurally: worked examples, before/after fixture pairs, sites, determinism."""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from conftest import REFERENCES

from katas.bugs import BUGS, lookup
from katas.catalogue import UnknownBug
from katas.engine.context import Context
from katas.engine.inject import NoSite, inject, ordered_sites, sites

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
    ctx = Context.of(source)
    for bug in BUGS.values():
        for seed in range(3):
            try:
                mutated = inject(bug, ctx, seed).source
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
    ctx = Context.of(source)
    ids = [s.id for s in sites(detach, ctx)]
    assert ids == ["detach:Classifier.forward:block(h)", "detach:Classifier.forward:self.drop(torch.relu(h))",
                   "detach:Classifier.forward:self.stem(x)"]
    assert {inject(detach, ctx, seed).site for seed in range(20)} == set(ids)


def test_a_bug_without_a_site_says_why():
    with pytest.raises(NoSite, match=r"`scheduler` does not apply to binary.py: it has no learning-rate scheduler"):
        inject(lookup("scheduler"), (REFERENCES / "binary.py").read_text(), 0, "binary.py")


def test_a_mistyped_bug_gets_a_suggestion():
    with pytest.raises(UnknownBug, match="Did you mean `zero-grad`"):
        lookup("zerograd")


def test_roles_come_from_structure_before_names():
    source = "import torch\nthing = torch.optim.SGD(params, lr=0.1)\nsched = 3\n"
    ctx = Context.of(source)
    import libcst.matchers as m

    names = {n.value: n for n in m.findall(ctx.module, m.Name()) if n.value in ("thing", "sched")}
    assert ctx.role(names["thing"]).kind == "optimizer" and not ctx.role(names["thing"]).guessed
    assert ctx.role(names["sched"]).guessed


def site_ids(bug_id: str, source: str) -> list[str]:
    return [s.id for s in sites(lookup(bug_id), Context.of(source))]


TRAIN = "    loss = model(x).mean()\n    loss.backward()\n    opt.step()\n    sched.step()\n"


def test_a_while_loop_trains_but_a_schedule_moves_out_of_a_batch_loop_only_into_an_epoch_loop():
    head = "import torch\nopt = torch.optim.SGD(ps)\nsched = torch.optim.lr_scheduler.OneCycleLR(opt, 1.0, 9)\n"
    assert site_ids("scheduler", head + "while True:\n    x = get()\n" + TRAIN) == []
    nested = head + "while epoch < epochs:\n    for x in loader:\n" + TRAIN.replace("    ", "        ")
    assert site_ids("scheduler", nested) == ["scheduler:<module>:for x in loader:sched.step()"]
    called = head + "def run(loader):\n  for x in loader:\n" + TRAIN.replace("    ", "    ") + "for e in range(3):\n    run(dl)\n"
    assert site_ids("scheduler", called) == ["scheduler:run:for x in loader:sched.step()"]
    assert site_ids("zero-grad", head + "while step < n:\n    opt.zero_grad()\n" + TRAIN) == ["zero-grad:<module>:while step < n"]


def test_no_site_in_code_that_never_runs():
    head = "import torch\nopt = torch.optim.SGD(ps)\n"
    body = "    opt.zero_grad()\n    model(x).mean().backward()\n    opt.step()\n"
    assert site_ids("zero-grad", head + "for x in dl:\n  if False:\n" + body.replace("    ", "      ")) == []
    assert site_ids("zero-grad", head + "def f():\n  return\n  for x in dl:\n" + body) == []
    assert site_ids("zero-grad", head + "if not __debug__:\n for x in dl:\n" + body) == []
    assert site_ids("zero-grad", head + "if __debug__:\n for x in dl:\n" + body) == ["zero-grad:<module>:for x in dl"]


def test_a_train_switch_that_changes_nothing_is_no_site():
    source = (Path(__file__).parent / "operators" / "train_mode__comment_at_block_end.in.py").read_text()
    assert site_ids("train-mode", source) == ["train-mode:evaluate:model.train()"]
    without_restore = source.replace("    model.train()\n", "")
    assert site_ids("train-mode", without_restore) == ["train-mode:fit:model.train()"]


def test_no_site_where_the_planted_script_would_raise_or_change_nothing():
    """An ignore_index no class has (-100, nanoGPT's -1): removing it raises on padded targets or does nothing."""
    loss = "import torch.nn.functional as F\n{}loss = F.cross_entropy(logits, tags, ignore_index={})\n"
    assert site_ids("pad-loss", loss.format("", "-100")) == []
    assert site_ids("pad-loss", loss.format("IGNORE = -1\n", "IGNORE")) == []
    assert len(site_ids("pad-loss", loss.format("PAD = 0\n", "PAD"))) == 1


def test_a_chosen_site_is_planted_and_the_seed_orders_the_rest():
    source = (REFERENCES / "classifier.py").read_text()
    detach, ctx = lookup("detach"), Context.of(source)
    order = [s.id for s in ordered_sites(detach, ctx, 3)]
    assert sorted(order) == [s.id for s in sites(detach, ctx)] and order[0] == inject(detach, ctx, 3).site
    assert inject(detach, ctx, 3, site=order[-1]).site == order[-1]
    with pytest.raises(NoSite, match="has no site"):
        inject(detach, ctx, 3, site="detach:nowhere")
