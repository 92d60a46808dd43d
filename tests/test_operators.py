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


# -- the training loop, through calls into the file's own functions and methods --------------------------------

OPT = "import torch\nmodel = torch.nn.Linear(4, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
STEP = "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"


def test_calls_resolve_to_the_files_own_functions_through_scopes():
    source = """\
import torch


def fit_step(batch):
    pass


class Base:
    def step(self):
        pass


class Trainer(Base):
    def __init__(self):
        pass

    def step(self):
        super().step()

    def run(self, hook=fit_step):
        self.step()
        hook(0)


def train():  # a function of the file that model.train() never calls
    pass


trainer = Trainer()
trainer.run()
model.train()
torch.optim.LBFGS([]).step(fit_step)
"""
    ctx = Context.of(source)
    import libcst as cst

    called = {ctx.code(c): [ctx.where(f.body) for f in ctx.callees(c)] for c in ctx.all(cst.Call)}
    assert called["super().step()"] == ["Base.step"]
    assert called["self.step()"] == ["Trainer.step"]
    assert called["hook(0)"] == ["fit_step"]  # a parameter stands for the function it defaults to
    assert called["Trainer()"] == ["Trainer.__init__"]
    assert called["trainer.run()"] == ["Trainer.run"]
    assert called["model.train()"] == []
    assert called["torch.optim.LBFGS([]).step(fit_step)"] == ["fit_step"]  # given to be called back


def test_a_reset_the_loop_runs_through_a_call_is_a_site():
    per_epoch = OPT + "def train(epoch):\n    x = data\n" + STEP + "for epoch in range(3):\n    train(epoch)\n"
    assert site_ids("zero-grad", per_epoch) == ["zero-grad:<module>:for epoch in range(3)"]
    with_batches = OPT + "def train(epoch):\n  for x in loader:\n" + STEP + "for epoch in range(3):\n    train(epoch)\n"
    assert site_ids("zero-grad", with_batches) == ["zero-grad:train:for x in loader"]  # the batch loop's own reset
    methods = (OPT + "class T:\n  def _run_batch(self, x):\n" + STEP
               + "  def _run_epoch(self):\n    for x in self.data:\n      self._run_batch(x)\n"
               + "  def train(self):\n    for e in range(2):\n      self._run_epoch()\n")
    assert site_ids("zero-grad", methods) == ["zero-grad:T._run_epoch:for x in self.data"]
    closure = OPT + "for i in range(5):\n  def closure():\n" + STEP.replace("    opt.step()\n", "    return 1\n") \
        + "  opt.step(closure)\n"
    assert site_ids("zero-grad", closure) == ["zero-grad:<module>:for i in range(5)"]
    planted = inject(lookup("zero-grad"), closure, 0).source
    assert "zero_grad" not in planted and "opt.step(closure)" in planted


def test_a_reset_no_loop_runs_is_no_site():
    loop = "for x in batches:\n    model(x).sum().backward()\n    opt.step()\n"
    once = OPT + "def reset():\n    opt.zero_grad()\n\n\ndef unused(x):\n" + STEP + "reset()\n" + loop
    assert site_ids("zero-grad", once) == []
    recursive = OPT + "def again(n):\n    opt.zero_grad()\n    again(n - 1)\n" + "again(3)\n" + loop
    assert site_ids("zero-grad", recursive) == []
    named_like_a_method = OPT + "def train():\n    opt.zero_grad()\n" + loop.replace("for x in batches:\n",
                                                                                 "for x in batches:\n    model.train()\n")
    assert site_ids("zero-grad", named_like_a_method) == []  # model.train() is not the file's train()
    own = OPT + "def warmup():\n    opt.zero_grad()\n" + "warmup()\n" \
        + loop.replace("    opt.step()\n", "    opt.step()\n    opt.zero_grad()\n")
    assert site_ids("zero-grad", own) == ["zero-grad:<module>:for x in batches"]
    assert inject(lookup("zero-grad"), own, 0).source.count("opt.zero_grad()") == 1  # the warm-up's stays


PHASES = """\
import torch
import torch.nn.functional as F

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for phase in ["train", "val"]:
        for x, y in loaders[phase]:
            with torch.set_grad_enabled(MODE):
                loss = F.cross_entropy(model(x), y)
                if phase == "train":
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
"""


def test_a_grad_mode_that_follows_the_phase_is_a_val_grad_site():
    source = PHASES.replace("MODE", 'phase == "train"')
    assert site_ids("val-grad", source) == ['val-grad:<module>:with torch.set_grad_enabled(phase == "train")']
    planted = inject(lookup("val-grad"), source, 0).source
    assert "set_grad_enabled" not in planted and '            loss = F.cross_entropy(model(x), y)\n' in planted
    assert site_ids("val-grad", PHASES.replace("MODE", "True")) == []
    assert site_ids("val-grad", PHASES.replace("MODE", "torch.is_grad_enabled()")) == []
    assert site_ids("val-grad", PHASES.replace("MODE", "phase").replace('if phase == "train":', "if True:")) == []
    flag = """\
import torch


def run_epoch(model, loader, opt, is_train):
    with torch.set_grad_enabled(is_train):
        for x, y in loader:
            loss = model(x).sum()
            if is_train:
                loss.backward()
                opt.step()


def evaluate(model, loader):
    with torch.set_grad_enabled(False):
        return sum(model(x).sum().item() for x, _ in loader)
"""
    assert site_ids("val-grad", flag) == ["val-grad:evaluate:with torch.set_grad_enabled(False)",
                                          "val-grad:run_epoch:with torch.set_grad_enabled(is_train)"]
