"""The warm checker decides exactly as the cold one, and handles timeouts and crashes the same way."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import FIXTURES

from checker.runner import Limits, child_env, run
from checker.verdict import judge
from checker.warm import WarmServer


@pytest.fixture(scope="module")
def server():
    warm = WarmServer(child_env())
    yield warm
    warm.close()


def verdicts(path: Path, warm=None, timeout: float = 60):
    limits = Limits(timeout=timeout)
    report = judge(run(path, "cpu", limits, warm=warm), str(path), "cpu", limits)
    return report.verdict, report.exit_code, [(f.probe, f.status, f.measured) for f in report.findings]


@pytest.mark.parametrize("name", ["grads_accumulate__broken.py", "worker_rng__broken.py", "baseline.py"])
def test_warm_and_cold_agree(name, server):
    with ThreadPoolExecutor(max_workers=2) as pool:
        warm, cold = pool.map(lambda w: verdicts(FIXTURES / name, w), (server, None))
    assert warm == cold


def test_warm_timeout_and_crash(tmp_path, server):
    spin = tmp_path / "spin.py"
    spin.write_text("while True:\n    pass\n")
    assert verdicts(spin, server, timeout=1)[:2] == ("timeout", 4)
    boom = tmp_path / "boom.py"
    boom.write_text("import os\nos._exit(0)\n")
    assert verdicts(boom, server)[:2] == ("script-failed", 3)
    assert verdicts(FIXTURES / "baseline.py", server)[:2] == ("pass", 0)  # the server is still fine


def test_a_run_reports_its_training_steps_while_it_runs(server, tmp_path):
    """The heartbeat carries the optimizer steps taken so far: what `kata watch`'s status line shows."""
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nimport torch\n\nmodel = torch.nn.Linear(2, 1)\n"
                    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nfor _ in range(10):\n"
                    "    optimizer.zero_grad()\n    model(torch.ones(4, 2)).sum().backward()\n    optimizer.step()\n"
                    "    time.sleep(0.2)\n")
    seen: list[int | None] = []
    result = run(slow, "cpu", Limits(timeout=60), warm=server, progress=seen.append)
    steps = [s for s in seen if s is not None]
    assert result.record["facts"]["updates"] == 10
    assert steps == sorted(steps) and 0 < steps[-1] <= 10 and len(set(steps)) >= 3, seen
