"""`kata check --profile`: where the time of the training steps goes, phase by phase (checker.clock)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from checker.clock import DATA, PhaseClock
from katas.cli import main


class FakeTime:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def wait(self, seconds: float) -> None:
        self.t += seconds


def test_each_interval_goes_to_the_innermost_phase_and_the_span_ends_at_the_last_update():
    t = FakeTime()
    clock = PhaseClock(now=t)
    clock.enter((DATA, 0))
    t.wait(3)
    clock.leave((DATA, 0))
    t.wait(1)  # the script's own code between phases
    clock.enter("forward")
    t.wait(2)
    clock.enter("checker")  # the checker's work inside a forward hook is the checker's
    t.wait(0.5)
    clock.leave("checker")
    t.wait(2)
    clock.leave("forward")
    clock.enter("optimizer")
    clock.enter("forward")  # a closure step: its forward is forward time
    t.wait(1)
    clock.leave("forward")
    t.wait(1)
    clock.leave("optimizer")
    clock.update_end()
    clock.enter("evaluation")  # after the last update: no training step holds it
    t.wait(50)
    clock.leave("evaluation")
    summary = clock.summary(training_loaders={0})
    assert summary["updates"] == 1 and summary["span_s"] == pytest.approx(10.5) and summary["steps_s"] == [10.5]
    assert summary["phases"] == pytest.approx({"data": 3, "forward": 5, "backward": 0, "optimizer": 1,
                                               "evaluation": 0, "checker": 0.5, "other": 1})


def test_waits_of_a_loader_that_trained_nothing_are_evaluation_and_a_phase_left_open_is_closed_by_its_parent():
    t = FakeTime()
    clock = PhaseClock(now=t)
    clock.enter((DATA, 1))
    t.wait(2)
    clock.leave((DATA, 1))
    clock.enter("backward")
    clock.enter("checker")  # its leave never ran (an exception in the hook)
    t.wait(1)
    clock.leave("backward")
    t.wait(4)
    clock.update_end()
    phases = clock.summary(training_loaders={0})["phases"]
    assert phases["evaluation"] == 2 and phases["checker"] == 1 and phases["other"] == 4 and phases["data"] == 0


SLOW_DATA = """\
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
X = torch.randn(256, 8)
Y = (X[:, 0] > 0).long()


class Decoded(Dataset):
    def __len__(self):
        return len(Y)

    def __getitem__(self, i):
        time.sleep(0.002)  # decoding a file, in the main process
        return X[i], Y[i]


model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
loader = DataLoader(Decoded(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
for epoch in range(2):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}  loss {loss.item():.3f}")
"""
SLOW_FORWARD = SLOW_DATA.replace("        time.sleep(0.002)  # decoding a file, in the main process\n", "").replace(
    "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))",
    "class Slow(nn.Sequential):\n    def forward(self, x):\n        time.sleep(0.01)\n        return super().forward(x)\n\n\n"
    "model = Slow(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))")


def profiled(tmp_path, source: str, *options: str) -> dict:
    script = tmp_path / "train.py"
    script.write_text(source)
    result = CliRunner().invoke(main, ["check", "--json", *options, str(script)])
    doc = json.loads(result.stdout)
    assert doc["verdict"] == "pass", doc["problem"]
    return doc


@pytest.mark.parametrize(("source", "slowest"), [(SLOW_DATA, "data"), (SLOW_FORWARD, "forward")],
                         ids=["slow-getitem", "slow-forward"])
def test_the_phase_that_takes_the_time_is_the_largest(tmp_path, source, slowest):
    """16 ms of decoding per batch of 8 in the main process, or 10 ms of forward per step, against a model that
    takes well under a millisecond: the slow phase holds most of each step."""
    profile = profiled(tmp_path, source, "--profile")["profile"]
    assert profile["updates"] == 64
    phases = profile["phases"]
    assert max(phases, key=phases.get) == slowest and phases[slowest] > 0.5 * profile["span_s"]
    assert sum(phases.values()) == pytest.approx(profile["span_s"], rel=1e-6)
    assert len(profile["steps_s"]) == 64 and sum(profile["steps_s"]) == pytest.approx(profile["span_s"], rel=1e-6)


def test_no_profile_unless_asked(tmp_path):
    assert "profile" not in profiled(tmp_path, SLOW_FORWARD)


def test_the_python_api_profiles_too(tmp_path):
    from katas import check

    script = tmp_path / "train.py"
    script.write_text(SLOW_DATA)
    report = check(script, profile=True, steps=8)
    assert report.profile["updates"] == 8 and check(script, steps=8).profile is None


def test_step_times_past_the_points_kept_are_means_of_their_share():
    t = FakeTime()
    clock = PhaseClock(now=t)
    clock.enter("forward")
    for step in range(1000):
        t.wait(2.0 if step % 100 == 99 else 1.0)  # an evaluation every 100 steps
        clock.update_end()
    steps = clock.summary(training_loaders=set())["steps_s"]
    assert len(steps) == 256 and sum(steps) == pytest.approx(sum(clock.steps) * 256 / 1000, rel=0.01)
    assert max(steps) > 1.2 and min(steps) == 1.0
