"""The data-parallel bugs' operators: their sites in ddp.py and in other shapes, and none elsewhere. (That each
planted script runs, under two ranks, and trips its probes is the kill matrix's job: tests/test_injected_bugs.py.)"""
from __future__ import annotations

import pytest
from conftest import REFERENCES

from katas.bugs import BUGS, lookup
from katas.engine.context import Context
from katas.engine.inject import inject, sites

DDP_BUGS = [bug for bug in BUGS.values() if bug.id.startswith("ddp-")]
HEAD = "import os\nimport torch\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
TRAIN = "    opt.zero_grad()\n    loss_fn(model(x), y).backward()\n    opt.step()\n"


def found(bug_id: str, source: str) -> list[str]:
    return [s.id for s in sites(lookup(bug_id), Context.of(HEAD + source))]


def planted(bug_id: str, source: str) -> str:
    return inject(lookup(bug_id), HEAD + source, 0).source.removeprefix(HEAD)


def test_each_applies_to_the_ddp_reference_at_the_expected_sites():
    ctx = Context.of((REFERENCES / "ddp.py").read_text())
    assert {bug.id: [s.id for s in sites(bug, ctx)] for bug in DDP_BUGS} == {
        "ddp-set-epoch": ["ddp-set-epoch:main:sampler.set_epoch(epoch)"],
        "ddp-no-sampler": ["ddp-no-sampler:main:DataLoader(train_set)"],
        "ddp-metric": ["ddp-metric:evaluate:dist.all_reduce(counts, op=dist.ReduceOp.SUM)"],
        "ddp-module": ["ddp-module:train_one_epoch:model(x)"],
        "ddp-save": ["ddp-save:main:if rank == 0"],
        "ddp-rank-seed": ["ddp-rank-seed:main:torch.Generator().manual_seed(args.seed + rank)",
                          "ddp-rank-seed:main:torch.manual_seed(args.seed + rank)"],
    }


@pytest.mark.parametrize("reference", sorted(set(REFERENCES.glob("*.py")) - {REFERENCES / "ddp.py"}), ids=lambda p: p.stem)
def test_none_applies_to_a_script_without_distributed_code(reference):
    ctx = Context.of(reference.read_text())
    assert [bug.id for bug in DDP_BUGS if sites(bug, ctx)] == []


def test_set_epoch_goes_with_a_guard_of_its_own_and_only_on_a_distributed_sampler():
    source = ("sampler = DistributedSampler(ds)\ndl = DataLoader(ds, sampler=sampler)\nfor epoch in range(3):\n"
              "    if args.distributed:\n        sampler.set_epoch(epoch)\n    run(dl)\n")
    assert planted("ddp-set-epoch", source) == source.replace("    if args.distributed:\n        sampler.set_epoch(epoch)\n", "")
    through_loader = "dl = DataLoader(ds, sampler=DistributedSampler(ds))\nfor e in range(3):\n    dl.sampler.set_epoch(e)\n"
    assert found("ddp-set-epoch", through_loader) == ["ddp-set-epoch:<module>:dl.sampler.set_epoch(e)"]
    assert found("ddp-set-epoch", "sampler = BucketSampler(ds)\nfor e in range(3):\n    sampler.set_epoch(e)\n") == []


def test_no_sampler_keeps_the_sampler_that_set_epoch_needs():
    source = ("train = DataLoader(a, batch_size=8, sampler=DistributedSampler(a))\n"
              "val = DataLoader(b, sampler=DistributedSampler(b, shuffle=False))\n"
              "for epoch in range(3):\n    train.sampler.set_epoch(epoch)\n    for x, y in train:\n" +
              TRAIN.replace("    ", "        "))
    assert found("ddp-no-sampler", source) == []  # `train.sampler` would no longer have a set_epoch
    named = source.replace("train = DataLoader(a, batch_size=8, sampler=DistributedSampler(a))",
                           "s = DistributedSampler(a)\ntrain = DataLoader(a, batch_size=8, sampler=s)").replace(
        "train.sampler.set_epoch", "s.set_epoch")
    assert found("ddp-no-sampler", named) == ["ddp-no-sampler:<module>:DataLoader(a)"]
    assert "train = DataLoader(a, batch_size=8, shuffle=True)\n" in planted("ddp-no-sampler", named)


def test_metric_only_an_evaluations_count_of_correct_predictions():
    evaluate = ("def evaluate(model, loader):\n    correct, seen = 0, 0\n    for x, y in loader:\n"
                "        correct += (model(x).argmax(1) == y).sum().item()\n        seen += len(y)\n"
                "    both = torch.tensor([correct, seen])\n    dist.all_reduce(both)\n    return both[0] / both[1]\n")
    assert found("ddp-metric", evaluate) == ["ddp-metric:evaluate:dist.all_reduce(both)"]
    hits = "hits = torch.tensor(sum(int(net(x).argmax(-1).eq(y).sum()) for x, y in test_loader))\ndist.all_reduce(hits)\n"
    assert found("ddp-metric", hits) == ["ddp-metric:<module>:dist.all_reduce(hits)"]
    grads = "def sync(model):\n    for p in model.parameters():\n        dist.all_reduce(p.grad)\n"
    losses = ("for x, y in dl:\n    loss = loss_fn(model(x), y)\n    loss.backward()\n    total += loss.detach()\n"
              "dist.all_reduce(total)\nprint(total.item())\n")
    trained = "for x, y in dl:\n    right = (model(x).argmax(1) == y).sum()\n    step(x, y)\ndist.all_reduce(right)\n"
    step = "def step(x, y):\n    loss_fn(model(x), y).backward()\n\n\n"
    for source in (grads, losses, step + trained):
        assert found("ddp-metric", source) == []


def test_module_only_for_the_forward_that_reaches_backward():
    source = ("from torch.nn.parallel import DistributedDataParallel\n"
              "def fit(net, dl):\n    for x, y in dl:\n        out = net(x)\n        loss = loss_fn(out, y)\n"
              "        loss.backward()\n    print(net(x0))\n\n"
              "model = DistributedDataParallel(Net())\nfit(model, dl)\nplain = Net()\nplain(x).sum().backward()\n")
    assert found("ddp-module", source) == ["ddp-module:fit:net(x)"]


@pytest.mark.parametrize("guard", ["rank == 0", "0 == dist.get_rank()", "not rank", "local_rank == 0",
                                   "args.local_rank in [-1, 0]", "not dist.is_initialized() or dist.get_rank() == 0",
                                   "is_main()", "master"])
def test_save_unguards_rank_zero_tests(guard):
    head = ("rank = dist.get_rank()\nmaster = int(os.environ['RANK']) == 0\n\n\n"
            "def is_main():\n    return rank == 0\n\n\n")
    source = head + f"if {guard}:\n    torch.save(state, path)\n    print('saved')\n"
    assert planted("ddp-save", source) == head + "torch.save(state, path)\nprint('saved')\n"


def test_save_drops_only_the_rank_test_from_a_guard_that_tests_more():
    for guard in ("rank == 0 and epoch % 5 == 0", "epoch % 5 == 0 and rank == 0"):
        source = f"rank = dist.get_rank()\nif {guard}:\n    torch.save(state, path)\n"
        assert planted("ddp-save", source) == "rank = dist.get_rank()\nif epoch % 5 == 0:\n    torch.save(state, path)\n"


def test_save_leaves_other_guards_alone():
    for guard in ("epoch == 0", "rank == 1", "epoch == 0 and step == 1"):
        assert found("ddp-save", f"if {guard}:\n    torch.save(state, path)\n") == []
    assert found("ddp-save", "if rank == 0:\n    torch.save(state, path)\nelse:\n    wait()\n") == []
    assert found("ddp-save", "if rank == 0:\n    print(state)\n") == []


@pytest.mark.parametrize(("seed", "left"), [("rank + seed", "seed"), ("seed + dist.get_rank()", "seed"),
                                            ("args.seed + 100 * local_rank + 1", "args.seed + 1")])
def test_rank_seed_drops_the_rank_term(seed, left):
    line = "g = torch.Generator().manual_seed({})\n"
    assert planted("ddp-rank-seed", line.format(seed)) == line.format(left)


def test_rank_seed_needs_a_rank_and_something_left():
    for seed in ("seed + epoch", "rank", "seed * rank"):
        assert found("ddp-rank-seed", f"torch.manual_seed({seed})\n") == []
