"""The harness: a probe whose observer cannot even be built is that probe's error, never the script's."""
from __future__ import annotations

import subprocess
import sys

from checker import record
from checker.runner import Limits, Run, child_env
from checker.verdict import judge

SCRIPT = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
for step in range(20):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


CHILD = """\
import sys
from checker import checked, harness
from checker.probes import BY_ID

def broken(session):
    raise RuntimeError("observer could not start")

script, channel, probe_id = sys.argv[1:4]
BY_ID[probe_id].module.Observer = broken
harness.prepare()
checked.check(script, "cpu", channel, "key")
"""


def check_with_a_broken_observer(script: str, channel: str, probe_id: str) -> None:
    """In a process of its own (the harness instruments the process it runs in): break one probe's observer, check."""
    subprocess.run([sys.executable, "-c", CHILD, script, channel, probe_id], env=child_env(), capture_output=True,
                   timeout=120, check=True)


def test_an_observer_that_fails_to_start_is_reported_as_that_probes_error(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    check_with_a_broken_observer(str(script), str(tmp_path), "clip-order")
    found, forged = record.read(str(tmp_path), "key")
    assert found is not None and not forged
    report = judge(Run(found, 0, "exited", "", False, "", 0.1), str(script), "cpu", Limits())
    statuses = report.statuses()
    assert statuses["clip-order"] == "error" and report.verdict == "fail"
    assert "observer could not start" in next(f.message for f in report.findings if f.probe == "clip-order")
    assert statuses["grads-accumulate"] == "pass"
