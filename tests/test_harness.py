"""The harness: a probe whose observer cannot even be built is that probe's error, never the script's."""
from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import check
from tracebacks import ERROR, FRAMES, copy_raises_deep, frames

from checker import harness, record
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


def test_a_traceback_starts_at_the_scripts_own_first_frame(tmp_path, monkeypatch):
    """What ran the script (here a module beside it, as the checker is when the script sits above it; runpy) is
    never shown; the script's frames and those of its own modules below them are."""
    script = copy_raises_deep(tmp_path)
    (tmp_path / "launch.py").write_text("import runpy\n\n\ndef launch(path):\n    runpy.run_path(path, run_name='__main__')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "units", raising=False)
    launch = importlib.import_module("launch")
    with pytest.raises(KeyError) as raised:
        launch.launch(str(script))
    monkeypatch.delitem(sys.modules, "units")
    monkeypatch.delitem(sys.modules, "launch")
    shown = harness.script_traceback(raised.value, str(script))
    assert frames(shown) == FRAMES and shown.endswith(ERROR)


def test_a_crash_checked_warm_shows_the_scripts_own_frames_only(tmp_path, monkeypatch):
    """The scratch folder the script runs in inside the script's own folder: runpy's frames (whose names are no
    paths) are no frames of the script's."""
    script = copy_raises_deep(tmp_path)
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    report = check(script)
    assert report.verdict == "script-failed" and report.problem == f"the script raised {ERROR}"
    detail = report.to_json()["detail"]
    assert frames(detail) == FRAMES and detail.endswith(ERROR) and "runpy" not in detail


PERSISTENT_WORKERS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, num_workers=2, persistent_workers=True)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

main()
"""


def test_persistent_workers_exit_on_their_own_and_leave_no_temporary_folder(tmp_path):
    # A worker that sends batches makes a temporary folder (multiprocessing's, for its socket) that it removes as it
    # exits; killed with the run's processes instead, it left one folder per worker behind at every check.
    script = tmp_path / "persistent.py"
    script.write_text(PERSISTENT_WORKERS)
    with tempfile.TemporaryDirectory(prefix="kt-") as scratch:  # short: a socket's path must fit in 108 bytes
        done = subprocess.run([sys.executable, "-m", "katas", "check", str(script)], capture_output=True, text=True,
                              env={**child_env(), "TMPDIR": scratch}, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sorted(p.name for p in Path(scratch).iterdir() if p.name.startswith("pymp-")) == []
