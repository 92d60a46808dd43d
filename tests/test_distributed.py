"""Distributed runs: every rank observed, ranks compared, and a failing or hanging rank named, with nothing left."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, child_env, interruptible

from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS
from checker.probes import rank_params, rank_shards, rank_streams, rank_writes, reported_metric
from katas.cli import main
from katas.commands.watch import READY

FAULTY = '''\
import os, subprocess, sys, time
from pathlib import Path
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

FAULT = "{fault}"
pids = Path(__file__).with_suffix(".pids")
with open(pids, "a") as f:
    f.write(f"{{os.getpid()}}\\n")
if FAULT == "early" and os.environ["RANK"] == "1":
    raise RuntimeError("no data for this rank")
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
model = DistributedDataParallel(nn.Linear(4, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randint(2, (64,))
for step in range(20):
    if step == 10 and rank == 1:
        if FAULT == "raise":
            raise RuntimeError("rank one gives up")
        if FAULT == "exit":
            sys.exit(0)
        if FAULT == "crash":
            os._exit(7)
        if FAULT == "hang":
            dist.barrier()
    if step == 10 and rank == 0 and FAULT == "hang":
        time.sleep(600)
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
if FAULT == "child" and rank == 1:
    child = subprocess.Popen(["sleep", "301"])
    with open(pids, "a") as f:
        f.write(f"{{child.pid}}\\n")
dist.destroy_process_group()
'''


def faulty(tmp_path: Path, fault: str) -> Path:
    path = tmp_path / f"{fault}.py"
    path.write_text(FAULTY.format(fault=fault))
    return path


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def started(path: Path) -> list[int]:
    return [int(line) for line in path.with_suffix(".pids").read_text().split()]


# -- faults, through the CLI ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fault", "problem"), [
    ("raise", "rank 1 raised RuntimeError: rank one gives up; then rank 0 "),
    ("exit", "rank 1 exited (sys.exit) while the other ranks were still training; then rank 0 "),
    ("crash", "rank 1 called os._exit(7); then rank 0 "),
])
def test_a_failing_rank_is_named_first_and_nothing_is_left_running(tmp_path, fault, problem):
    script = faulty(tmp_path, fault)
    result = CliRunner().invoke(main, ["check", "--nproc", "2", "--json", str(script)])
    report = json.loads(result.output)
    assert (result.exit_code, report["verdict"], report["nproc"]) == (3, "script-failed", 2)
    assert report["problem"].startswith(problem), report["problem"]
    assert len(started(script)) == 2 and not any(map(alive, started(script)))


def test_a_rank_that_fails_before_joining_is_named_and_the_waiting_rank_too(tmp_path):
    script = faulty(tmp_path, "early")
    result = CliRunner().invoke(main, ["check", "--nproc", "2", "--idle", "5", "--json", str(script)])
    report = json.loads(result.output)
    assert (result.exit_code, report["verdict"]) == (3, "script-failed"), report["problem"]
    assert report["problem"].startswith("rank 1 raised RuntimeError: no data for this rank; "), report["problem"]
    assert "rank 0 was " in report["problem"]
    assert not any(map(alive, started(script)))


def test_a_rank_stuck_in_a_collective_is_reported_with_where_it_waits(tmp_path):
    script = faulty(tmp_path, "hang")
    result = CliRunner().invoke(main, ["check", "--nproc", "2", "--idle", "5", "--json", str(script)])
    report = json.loads(result.output)
    assert (result.exit_code, report["verdict"]) == (4, "timeout")
    assert "rank 1 was waiting in torch.distributed.barrier" in report["problem"], report["problem"]
    assert "rank 0 was still running" in report["problem"]
    assert not any(map(alive, started(script)))


def test_under_torchrun_a_process_a_rank_left_is_named_with_its_rank_and_ended(tmp_path):
    """The real launcher (a subprocess `kata check`): the run passes, and the rank's leftover is reported."""
    script = faulty(tmp_path, "child")
    done = subprocess.run([sys.executable, "-m", "katas", "check", "--nproc", "2", "--json", str(script)],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=240)
    report = json.loads(done.stdout)
    assert (done.returncode, report["verdict"], report["nproc"]) == (0, "pass", 2), report["problem"]
    assert report["notes"] == ["rank 1 left a process running (sleep 301); the checker ended it"]
    assert len(started(script)) == 3 and not any(map(alive, started(script)))


def test_a_distributed_script_run_as_one_process_is_told_to_use_nproc(tmp_path):
    result = CliRunner().invoke(main, ["check", "--json", str(faulty(tmp_path, "none"))])
    report = json.loads(result.output)
    assert result.exit_code == 3 and report["problem"].endswith("check it with --nproc N"), report["problem"]


# -- the cross-rank judges, on observations made up for the purpose -----------------------------------------------

FACTS = [RunFacts(rank=0, world=2), RunFacts(rank=1, world=2)]


def test_rank_params_fails_on_replicas_that_drift_and_passes_equal_ones():
    equal = rank_params.Observation([1.0, 4.0], [[1, 1.5, 5.0], [2, 1.7, 5.5]], 2)
    drift = rank_params.Observation([1.0, 4.0], [[1, 1.5, 5.0], [2, 1.8, 5.6]], 2)
    assert rank_params.judge_ranks([equal, equal], FACTS).status == PASS
    finding = rank_params.judge_ranks([equal, drift], FACTS)
    assert finding.status == FAIL and "after update 2 rank 1's differ" in finding.message
    sharded = rank_params.Observation([2.0, 9.0], [[1, 1.5, 5.0]], 1)
    assert rank_params.judge_ranks([equal, sharded], FACTS).status == NOT_APPLICABLE
    assert rank_params.judge(equal, FACTS[0]).status == NOT_APPLICABLE


def drifted(**evidence) -> list[rank_params.Observation]:
    """Two replicas equal before the first update and apart after it, with the evidence a diagnosis reads."""
    shared = {key: value for key, value in evidence.items() if key != "grads"}
    grads = evidence.get("grads", ([], []))
    return [rank_params.Observation([1.0, 4.0], [[1, 1.5, 5.0]], 1, grads=grads[0], **shared),
            rank_params.Observation([1.0, 4.0], [[1, 1.6, 5.2]], 1, grads=grads[1], **shared)]


@pytest.mark.parametrize(("evidence", "named", "not_named"), [
    ({"grads": ([[1, 0.5, 0.25]], [[1, 0.5, 0.25]]), "through": 3},
     "applied the same gradients up to that update, so their steps differed", "not averaged"),
    ({"grads": ([[1, 0.5, 0.25]], [[1, 0.7, 0.49]]), "through": 3, "moved": ["torch.float32 on cpu to torch.float64 on cpu"]},
     "moved or cast after DistributedDataParallel was built over them (torch.float32 on cpu to torch.float64", "no_sync"),
    ({"grads": ([[1, 0.5, 0.25]], [[1, 0.7, 0.49]]), "around": 3},
     "every training forward called the wrapped module itself (.module)", "no_sync"),
    ({"grads": ([[1, 0.5, 0.25]], [[1, 0.7, 0.49]]), "through": 3, "around": 1},
     "a training forward around the wrapper (its .module); gradients accumulated under no_sync()", "cast"),
    ({"grads": ([[1, 0.5, 0.25]], [[1, 0.7, 0.49]]), "through": 3},
     "What leaves them unaveraged: gradients accumulated under no_sync()", "around the wrapper"),
])
def test_rank_params_names_every_cause_its_evidence_admits(evidence, named, not_named):
    """Equal gradients mean the steps differed; unequal ones were never averaged, and a cast after wrapping or a
    model always called around its wrapper is the one cause named, else every cause that fits is listed."""
    finding = rank_params.judge_ranks(drifted(**evidence), FACTS)
    assert finding.status == FAIL and named in finding.message, finding.message
    assert not_named not in finding.message


def shard(indices: list[int], size: int = 100) -> dict:
    return {"dataset": "TensorDataset", "size": size, "indices": indices}


def test_rank_shards_fails_on_overlap_and_on_repeated_epochs():
    evens, odds = list(range(0, 100, 2)), list(range(1, 100, 2))
    split = [rank_shards.Observation([shard(evens), shard(odds[::-1])], True),
             rank_shards.Observation([shard(odds), shard(evens[::-1])], True)]
    assert rank_shards.judge_ranks(split, FACTS).status == PASS
    whole = [rank_shards.Observation([shard(list(range(100)))], True)] * 2
    finding = rank_shards.judge_ranks(whole, FACTS)
    assert finding.status == FAIL and "100 of the 100 samples" in finding.message
    padded = [rank_shards.Observation([shard(list(range(0, 50)) + [0], 101)], True),
              rank_shards.Observation([shard(list(range(50, 101)), 101)], True)]
    assert rank_shards.judge_ranks(padded, FACTS).status == PASS  # a sampler's padding is not an overlap
    fixed = [rank_shards.Observation([shard(evens), shard(evens)], True),
             rank_shards.Observation([shard(odds), shard(odds)], True)]
    finding = rank_shards.judge_ranks(fixed, FACTS)
    assert finding.status == FAIL and "same order, in all 2 training passes" in finding.message
    assert rank_shards.judge_ranks([rank_shards.Observation(), rank_shards.Observation()], FACTS).status == NOT_APPLICABLE


def test_rank_writes_fails_when_two_ranks_write_one_file():
    guarded = [rank_writes.Observation({"ckpt.pt": 1}), rank_writes.Observation()]
    per_rank = [rank_writes.Observation({"ckpt-0.pt": 1}), rank_writes.Observation({"ckpt-1.pt": 1})]
    assert rank_writes.judge_ranks(guarded, FACTS).status == PASS
    assert rank_writes.judge_ranks(per_rank, FACTS).status == PASS
    finding = rank_writes.judge_ranks([rank_writes.Observation({"ckpt.pt": 1})] * 2, FACTS)
    assert finding.status == FAIL and finding.message.startswith("ckpt.pt was written by 2 ranks (0, 1)")
    assert rank_writes.judge_ranks([rank_writes.Observation()] * 2, FACTS).status == NOT_APPLICABLE


def streams(*states: dict, orders=(1, 2)) -> rank_streams.Observation:
    return rank_streams.Observation([[i + 1, s, 0] for i, s in enumerate(states)], list(orders))


def test_rank_streams_fails_on_one_stream_shared_by_ranks_whose_data_differ():
    own = [streams({"g": "a1"}, {"g": "a2"}), streams({"g": "b1"}, {"g": "b2"}, orders=(3, 4))]
    assert rank_streams.judge_ranks(own, FACTS).status == PASS
    shared = [streams({"g": "a1"}, {"g": "a2"}), streams({"g": "a1"}, {"g": "a2"}, orders=(3, 4))]
    finding = rank_streams.judge_ranks(shared, FACTS)
    assert finding.status == FAIL and finding.message.startswith("g held the same state on all 2 ranks")
    same_data = [streams({"g": "a1"}, {"g": "a2"})] * 2
    assert rank_streams.judge_ranks(same_data, FACTS).status == CANNOT_TELL
    unused = [streams({"g": "a1"}, {"g": "a1"}), streams({"g": "a1"}, {"g": "a1"}, orders=(3, 4))]
    assert rank_streams.judge_ranks(unused, FACTS).status == NOT_APPLICABLE  # never drawn during training


def test_rank_streams_does_not_count_the_draws_a_dataloader_makes_as_each_pass_begins():
    """Ranks seeded alike that draw nothing while training: the default generator moves only when a pass begins
    (the loader's base seed), which is no symptom; a draw between two updates of one pass is."""
    def ranks(*states: str, passes: tuple[int, ...]) -> list[rank_streams.Observation]:
        rows = [[i + 1, {"g": state}, begun] for i, (state, begun) in enumerate(zip(states, passes))]
        return [rank_streams.Observation(rows, [1, 2]), rank_streams.Observation(rows, [3, 4])]

    assert rank_streams.judge_ranks(ranks("a1", "a1", "a2", "a2", passes=(1, 1, 2, 2)), FACTS).status == NOT_APPLICABLE
    finding = rank_streams.judge_ranks(ranks("a1", "a2", "a3", "a3", passes=(1, 1, 2, 2)), FACTS)
    assert finding.status == FAIL, finding.message


def forked_with_set_epoch(tmp_path, text: str):
    """``text`` (a variant of SPAWNED) with ``set_epoch`` called, its ranks forked, checked: (result, report)."""
    script = tmp_path / "variant.py"
    script.write_text(text.replace("        model.train()", "        sampler.set_epoch(epoch)\n        model.train()")
                      .replace("mp.spawn(worker, args=(2, port), nprocs=2)",
                               'mp.start_processes(worker, args=(2, port), nprocs=2, start_method="fork")'))
    result = CliRunner().invoke(main, ["check", "--json", str(script)])
    return result, json.loads(result.output)


def test_ranks_seeded_alike_that_draw_nothing_while_training_are_not_a_symptom(tmp_path):
    """Two forked ranks, both seeded 0, no dropout, a DistributedSampler with set_epoch: every rank's default
    generator moves alike at each pass's start (the loader's base seed) and at no other time."""
    result, report = forked_with_set_epoch(tmp_path, SPAWNED.replace("torch.manual_seed(rank)", "torch.manual_seed(0)")
                                           .replace("nn.Dropout(0.1), ", ""))
    assert (result.exit_code, report["nproc"]) == (0, 2), report["probes"]
    judged = {p["probe"]: p["status"] for p in report["probes"]}
    assert judged["rank-streams"] == NOT_APPLICABLE and judged["rank-params"] == PASS


def metric_report(text: str, value: float, correct: int, total: int) -> dict:
    return {"text": text, "readings": [{"label": "acc", "text": f"{value}", "values": [[value, 0.0005]],
                                        "best": False}],
            "candidates": [{"what": "evaluation", "accuracy": correct / total, "correct": correct, "total": total}],
            "clean": True, "earlier": [], "blocks": [0]}


def test_a_printed_accuracy_is_judged_over_every_rank_s_evaluation():
    def rank0(value: float) -> reported_metric.Observation:
        return reported_metric.Observation([metric_report(f"acc {value}", value, 230, 256)], 2, prints=1,
                                           blocks=[{"correct": 230, "total": 256}])

    rank1 = reported_metric.Observation([], 2, blocks=[{"correct": 250, "total": 256}])
    assert reported_metric.judge_ranks([rank0(0.9375), rank1], FACTS).status == PASS  # 480 of 512
    finding = reported_metric.judge_ranks([rank0(0.8984), rank1], FACTS)  # rank 0's own shard: 230 of 256
    assert finding.status == FAIL and "rank 0's own shard's (230 of 256 samples)" in finding.message


SPAWNED = '''\
import socket
import torch, torch.distributed as dist, torch.multiprocessing as mp, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def worker(rank, world, port):
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    torch.manual_seed(rank)
    x = torch.randn(512, 8, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, (x[:, 0] > 0).long())
    sampler = DistributedSampler(data, num_replicas=world, rank=rank)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port), nprocs=2)
'''


BY_NAME = {"attribute": SPAWNED,  # a spawned rank imports its module before the checker is installed in it:
           "by name": SPAWNED.replace("from torch.nn.parallel", "from torch.distributed import init_process_group\n"
                                      "from torch.nn.parallel").replace("    dist.init_process_group(",
                                                                        "    init_process_group(")}


@pytest.mark.parametrize("joins", BY_NAME)
def test_ranks_a_script_spawns_itself_are_observed_and_compared(tmp_path, joins):
    """mp.spawn with an explicit TCPStore on the loopback, set_epoch forgotten: each spawned rank is observed, and
    known as a rank though it took init_process_group by name before the checker was there to wrap it."""
    script = tmp_path / "spawned.py"
    script.write_text(BY_NAME[joins])
    assert ("init_process_group(\"gloo\"" in script.read_text()) and (joins == "attribute") == (
        "dist.init_process_group" in script.read_text())
    result = CliRunner().invoke(main, ["check", "--json", str(script)])
    report = json.loads(result.output)
    assert (result.exit_code, report["nproc"]) == (1, 2), report["problem"]
    failed = {p["probe"] for p in report["probes"] if p["status"] in (FAIL, "error")}
    assert failed == {"epoch-order", "rank-shards"}, report["probes"]
    judged = {p["probe"]: p["status"] for p in report["probes"]}
    assert judged["rank-params"] == judged["rank-streams"] == PASS


# -- katas and interview tasks made from the data-parallel reference -----------------------------------------------

def test_a_ddp_kata_is_checked_as_two_ranks_without_being_told(tmp_path):
    made = CliRunner().invoke(main, ["new", "--ref", "ddp", "--bug", "ddp-set-epoch", "--seed", "4", "--no-verify",
                                     "--dir", str(tmp_path)])
    assert made.exit_code == 0 and "torchrun --standalone --nproc-per-node 2" in made.output, made.output
    result = CliRunner().invoke(main, ["check", "--json", str(tmp_path / "01.py")])
    report = json.loads(result.output)
    assert (result.exit_code, report["nproc"], report["kata"]["injected_bug"]) == (1, 2, "still present")
    flagged = {p["check"] for p in report["probes"] if p["status"] == FAIL}
    assert flagged == {"batch-order", "rank-samples"}, report["probes"]  # symptoms only: no probe ids, no causes


def test_a_ddp_interview_task_is_briefed_for_torchrun_and_graded_as_two_ranks(tmp_path):
    out = tmp_path / "task"
    made = CliRunner().invoke(main, ["interview", "--ref", "ddp", "--bugs", "2", "--seed", "3", "--out", str(out)])
    assert made.exit_code == 0, made.output
    brief = (out / "candidate" / "README.md").read_text()
    assert "torchrun --standalone --nproc-per-node 2 train.py" in brief and "    kata check train.py" in brief
    before = (out / "candidate" / "train.py").read_text()
    checked = subprocess.run([sys.executable, "-m", "katas", "check", "--json", "train.py"], cwd=out / "candidate",
                             capture_output=True, text=True, env=child_env(), timeout=300)  # as the brief says
    doc = json.loads(checked.stdout)
    assert (checked.returncode, doc["nproc"]) == (1, 2), doc["problem"]  # the two ranks run: the bugs show
    assert (out / "candidate" / "train.py").read_text() == before
    (out / "candidate" / "train.py").write_text((out / "key" / "solution.py").read_text())
    graded = CliRunner().invoke(main, ["grade", "--json", str(out)])
    doc = json.loads(graded.output)
    assert graded.exit_code == 0 and doc["fixed"] == 2, doc


def test_watch_rechecks_a_ddp_kata_as_two_ranks(tmp_path):
    assert CliRunner().invoke(main, ["new", "--ref", "ddp", "--bug", "ddp-save", "--seed", "2", "--no-verify",
                                     "--dir", str(tmp_path / "broken")]).exit_code == 0
    watch = subprocess.Popen([sys.executable, "-m", "katas", "watch", "01"], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**child_env(), "NO_COLOR": "1"},
                             preexec_fn=interruptible)
    stop = threading.Timer(240, watch.kill)  # a watch that never reports ends, and the wait below fails
    stop.start()
    lines: list[str] = []

    def until(words: str) -> None:
        while words not in (line := watch.stdout.readline()):
            assert line, "".join(lines[-20:])
            lines.append(line)

    try:
        until(READY)
        assert any("2 ranks" in line for line in lines) and any("still present" in line for line in lines)
        (tmp_path / "broken" / "01.py").write_text((ROOT / "reference" / "ddp.py").read_text())
        until(READY)
        assert any("injected bug: fixed" in line for line in lines), "".join(lines[-20:])
    finally:
        stop.cancel()
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=30)


def test_a_checked_rank_joins_a_group_and_wraps_ddp_without_loading_dynamo(tmp_path):
    """The checked process defers dynamo (checker/fast_start.py): eager DDP must not load it, and a script that
    touches dynamo's config gets the real module, whose answers then count."""
    probe = """
import os, sys
from checker import fast_start
fast_start.install()
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
dist.init_process_group("gloo", rank=0, world_size=1)
model = DistributedDataParallel(torch.nn.Linear(2, 2))
deferred = type(sys.modules["torch._dynamo"]).__name__
torch._dynamo.config.optimize_ddp = "no_optimization"
print(deferred, model._use_python_reducer, torch._dynamo.utils.get_optimize_ddp_mode())
dist.destroy_process_group()
"""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, "-c", probe, str(port)], capture_output=True, text=True, env=child_env(),
                          cwd=tmp_path, timeout=120)
    assert done.stdout.split() == ["_StandIn", "False", "no_optimization"], done.stderr


def test_a_print_that_says_it_is_one_rank_s_accuracy_may_report_its_shard():
    labelled = reported_metric.Observation([metric_report("rank 0 local acc 0.8984", 0.8984, 230, 256)], 2,
                                           prints=1, blocks=[{"correct": 230, "total": 256}])
    rank1 = reported_metric.Observation([], 2, blocks=[{"correct": 250, "total": 256}])
    assert reported_metric.judge_ranks([labelled, rank1], FACTS).status == PASS


def test_ranks_forked_by_the_script_are_observed_and_compared(tmp_path):
    """start_processes with the fork method: each forked copy puts the parent's observers away and observes itself."""
    script = tmp_path / "forked.py"
    script.write_text(SPAWNED.replace("mp.spawn(worker, args=(2, port), nprocs=2)",
                                      'mp.start_processes(worker, args=(2, port), nprocs=2, start_method="fork")'))
    result = CliRunner().invoke(main, ["check", "--json", str(script)])
    report = json.loads(result.output)
    assert (result.exit_code, report["nproc"]) == (1, 2), report["problem"]
    failed = {p["probe"] for p in report["probes"] if p["status"] in (FAIL, "error")}
    assert failed == {"epoch-order", "rank-shards"}, report["probes"]


def test_a_model_cast_after_it_was_wrapped_drifts_and_the_cast_is_named(tmp_path):
    """DistributedDataParallel built, then the model cast to float64: its gradients are no longer averaged."""
    result, report = forked_with_set_epoch(tmp_path, SPAWNED.replace("opt = torch.optim",
                                                                      "model.double()\n    opt = torch.optim")
                                           .replace("model(xb)", "model(xb.double())"))
    assert (result.exit_code, report["nproc"]) == (1, 2), report["problem"]
    failed = {p["probe"]: p["message"] for p in report["probes"] if p["status"] in (FAIL, "error")}
    assert set(failed) == {"rank-params"}, report["probes"]
    assert "torch.float32 on cpu to torch.float64 on cpu" in failed["rank-params"]


HOGWILD = '''\
import torch, torch.nn as nn, torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset


def train(rank, model):
    torch.manual_seed(rank)
    x = torch.randn(512, 8)
    loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for epoch in range(3):
        for xb, yb in loader:
            {reset}
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()


if __name__ == "__main__":
    mp.set_start_method("{method}", force=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model.share_memory()
    workers = [mp.Process(target=train, args=(rank, model)) for rank in range(2)]
    for p in workers:
        p.start()
    for p in workers:
        p.join()
    with torch.no_grad():
        x = torch.randn(256, 8)
        print("accuracy", round((model(x).argmax(1) == (x[:, 0] > 0).long()).float().mean().item(), 3))
'''


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_hogwild_workers_are_observed_each_as_a_process_and_never_compared_as_replicas(tmp_path, method):
    """multiprocessing.Process workers training one shared model: each is judged; the replica probes do not apply."""
    clean, broken = tmp_path / f"hogwild_{method}.py", tmp_path / f"hogwild_{method}_no_reset.py"
    clean.write_text(HOGWILD.format(reset="optimizer.zero_grad()", method=method))
    broken.write_text(HOGWILD.format(reset="pass", method=method))
    reports = [json.loads(CliRunner().invoke(main, ["check", "--json", str(path)]).output) for path in (clean, broken)]
    assert [(r["exit_code"], r["nproc"]) for r in reports] == [(0, 2), (1, 2)], [r["problem"] for r in reports]
    statuses = [{p["probe"]: p for p in r["probes"]} for r in reports]
    assert statuses[0]["rank-params"]["status"] == "n/a" and "process group" in statuses[0]["rank-params"]["message"]
    assert statuses[1]["grads-accumulate"]["status"] == FAIL
    assert statuses[1]["grads-accumulate"]["message"].startswith("every process: ")


def test_hogwild_evaluation_the_main_process_runs_after_the_workers_join_is_judged(tmp_path):
    """The workers train the shared model; the main process evaluates it after they join. That evaluation, with
    dropout left on, fails eval-mode, named as the main process's; with model.eval() before it, it passes."""
    template = HOGWILD.format(reset="optimizer.zero_grad()", method="fork").replace(
        "nn.ReLU(), nn.Linear(16, 2)", "nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2)").replace(
        "    with torch.no_grad():\n", "    {evaluate}\n    with torch.no_grad():\n")
    scripts = {evaluate: tmp_path / f"hogwild_{name}.py" for name, evaluate in (("train_mode", "pass"),
                                                                                ("eval", "model.eval()"))}
    for evaluate, path in scripts.items():
        path.write_text(template.replace("{evaluate}", evaluate))
    reports = {evaluate: json.loads(CliRunner().invoke(main, ["check", "--json", str(path)]).output)
               for evaluate, path in scripts.items()}
    statuses = {evaluate: {p["probe"]: p for p in r["probes"]} for evaluate, r in reports.items()}
    assert [reports[e]["exit_code"] for e in ("pass", "model.eval()")] == [1, 0], [r["problem"] for r in reports.values()]
    assert statuses["pass"]["eval-mode"]["status"] == FAIL
    assert statuses["pass"]["eval-mode"]["message"].startswith("the main process: ")
    assert statuses["model.eval()"]["eval-mode"]["status"] == PASS
