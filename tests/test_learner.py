"""The learner's loop, through click's runner (not a terminal, so the plain rendering is asserted)."""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from conftest import REFERENCES, interruptible
from rich.console import Console

from katas.bugs import BUGS
from katas.cli import main
from katas.commands.learner import complete_bug, complete_kata
from katas.commands.watch import READY, progress_line
from katas.state import state_path


def kata(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input, env={"NO_COLOR": "1"})


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two katas, made once: 01 (eval-mode) and 02 (leak), both on the classifier."""
    folder = tmp_path_factory.mktemp("made") / "practice"
    for bug in ("eval-mode", "leak"):
        assert kata("new", "--bug", bug, "--seed", "1", "--no-verify", "--dir", str(folder)).exit_code == 0
    return folder


@pytest.fixture
def workspace(made, tmp_path, monkeypatch):
    """A fresh folder holding a copy of those katas in its workspace, practice/, as the current folder."""
    shutil.copytree(made, tmp_path / "practice")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def plain(result) -> str:
    assert "\x1b[" not in result.output
    return " ".join(result.output.split())


def test_status_with_no_katas_says_how_to_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = kata()
    assert result.exit_code == 0 and "No workspace yet: `kata new` starts one, practice/" in plain(result)


def test_status_and_list_show_progress_and_the_next_command(workspace):
    assert "practice/: 2 katas, 0 passed, 2 to go" in plain(kata())
    assert "Next: fix practice/01.py, then run: kata check practice/01.py" in plain(kata())
    (workspace / "practice" / "01.py").write_text((REFERENCES / "classifier.py").read_text())
    checked = kata("check", "practice/01.py")
    assert checked.exit_code == 0 and "injected bug: fixed" in plain(checked)
    assert "Kata solved" in plain(checked)
    doc = json.loads(kata("list", "--json").output)
    assert [(k["kata"], k["status"], k["bug"]) for k in doc["katas"]] == [
        ("01", "passed", BUGS["eval-mode"].title), ("02", "to do", None)]
    assert [k["kata"] for k in json.loads(kata("list", "--json", "--pending").output)["katas"]] == ["02"]
    assert [k["kata"] for k in json.loads(kata("list", "--json", "--done").output)["katas"]] == ["01"]
    table = plain(kata("list"))
    assert "01 passed 0/3 Validation in training mode" in table and "02 to do 0/3 ?" in table
    assert "Next: fix practice/02.py" in table


def test_a_failing_check_is_recorded_and_suggests_a_hint(workspace):
    assert kata("check", "practice/02.py").exit_code == 1
    assert "(stuck? kata hint 02)" in plain(kata())
    state = json.loads(state_path(workspace / "practice").read_text())
    assert state["version"] == 1 and state["katas"]["02"]["status"] == "failing"


def test_hints_come_one_at_a_time_and_all_only_after_passing(workspace):
    hints = BUGS["leak"].hints
    for n in range(3):
        assert f"Hint {n + 1} of 3: {hints[n]}" in plain(kata("hint", "02"))
    last = plain(kata("hint", "02"))
    assert "Hint 3 of 3" in last and "That was the last hint. Still stuck? kata solution 02 --reveal" in last
    refused = kata("hint", "02", "--all")
    assert refused.exit_code == 2 and "--all opens once the kata passes" in refused.output
    (workspace / "practice" / "02.py").write_text((REFERENCES / "classifier.py").read_text())
    assert kata("check", "practice/02.py").exit_code == 0
    every = plain(kata("hint", "02", "--all"))
    assert all(h in every for h in hints)
    assert json.loads(kata("list", "--json").output)["katas"][1]["hints"] == 3


def test_explain_renders_the_catalogue_page_and_suggests_on_typos():
    page = plain(kata("explain", "leak"))
    bug = BUGS["leak"]
    for part in ("What you observe", bug.observe, "Why it happens", "How to fix it", "Example", "- running += loss",
                 "+ running += float(loss)", bug.follow_up[0], "kata new --bug leak"):
        assert part in page
    typo = kata("explain", "leek")
    assert typo.exit_code == 2 and "Did you mean `leak`?" in typo.output


def test_solution_is_locked_until_the_kata_passes_or_is_revealed(workspace):
    locked = kata("solution", "01")
    assert locked.exit_code == 2 and "kata solution 01 --reveal" in locked.output
    declined = kata("solution", "01", "--reveal", input="n\n")
    assert declined.exit_code == 1 and "model.eval()" not in declined.output
    shown = kata("solution", "01", "--reveal", input="y\n")
    changed = [line for line in shown.output.splitlines()
               if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert shown.exit_code == 0 and len(changed) == 1, shown.output  # against the disguised script: only the fix
    assert changed[0].startswith("+") and changed[0].strip().endswith((".eval()", ".train(False)"))
    assert json.loads(state_path(workspace / "practice").read_text())["katas"]["01"]["revealed"] is True


def test_reset_restores_the_kata_and_keeps_the_learners_version(workspace):
    kata_file = workspace / "practice" / "01.py"
    original = kata_file.read_text()
    kata_file.write_text(original + "# my attempt\n")
    assert kata("reset", "01", input="n\n").exit_code == 1
    assert kata_file.read_text().endswith("# my attempt\n")
    done = kata("reset", "01", "--yes")
    assert done.exit_code == 0 and kata_file.read_text() == original
    backups = list((workspace / "practice" / ".kata" / "backup").glob("01.*.py"))
    assert [b.read_text() for b in backups] == [original + "# my attempt\n"]
    assert "nothing to reset" in plain(kata("reset", "01", "--yes"))


def test_bad_kata_arguments_are_clear_errors(workspace):
    missing = kata("hint", "07")
    assert missing.exit_code == 2 and "no kata practice/07.py" in missing.output
    (workspace / "mine.py").write_text("print(1)\n")
    foreign = kata("solution", "mine.py")
    assert foreign.exit_code == 2 and "was not made by `kata new`" in foreign.output


def test_completion_offers_kata_numbers_and_bug_ids(workspace):
    assert complete_kata(None, None, "0") == ["01", "02"]
    assert complete_bug(None, None, "tr") == ["train-mode"]


def test_watch_rechecks_on_every_save_and_stops_on_ctrl_c(workspace):
    script = workspace / "practice" / "02.py"
    watch = subprocess.Popen([sys.executable, "-m", "katas", "watch", "02"], cwd=workspace, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"},
                             preexec_fn=interruptible)
    lines: list[str] = []

    def until(words: str) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            lines.append(watch.stdout.readline())
            if words in lines[-1]:
                return
        raise AssertionError("".join(lines[-20:]))

    until(READY)
    assert lines[0] == "starting: importing torch…\n"  # at once, before anything is imported or run
    assert lines[1] == "checking practice/02.py: importing torch…\n"  # the first check runs cold: no waiting
    assert any("injected bug: still present" in line for line in lines) and any("FAIL" in line for line in lines)
    first = len(lines)
    script.write_text((REFERENCES / "classifier.py").read_text())
    until(READY)
    rechecked = [line for line in lines[first:] if line.startswith("checking")]
    assert rechecked[0] == "checking practice/02.py: starting…\n", lines[first:]  # forked from the warm server
    assert any("injected bug: fixed" in line for line in lines)
    watch.send_signal(signal.SIGINT)
    rest, _ = watch.communicate(timeout=30)
    assert watch.returncode == 0 and "Stopped watching." in rest, rest
    assert not any("\x1b[" in line for line in lines)
    assert json.loads(state_path(workspace / "practice").read_text())["katas"]["02"]["status"] == "passed"


@pytest.mark.parametrize("terminal", [True, False])
def test_a_running_check_shows_its_progress_as_a_status_line_or_plain_lines(terminal, monkeypatch):
    monkeypatch.setattr("katas.commands.watch.PIPE_EVERY", 0)  # in a pipe: a line at every report
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=80, color_system=None)
    with progress_line(console, "checking practice/02.py", "importing torch") as progress:
        progress(None)
        progress(7)
        time.sleep(0.15)  # a spinner refreshes about ten times a second
    if terminal:  # one line redrawn in place, gone once the report is shown
        assert "\r" in out.getvalue() or "\x1b[" in out.getvalue()
        assert "checking practice/02.py: 7 training steps… 0 s" in out.getvalue()
    else:
        assert out.getvalue().splitlines() == ["checking practice/02.py: importing torch…",
                                               "checking practice/02.py: importing torch… 0 s",
                                               "checking practice/02.py: 7 training steps… 0 s"]


def test_watch_can_poll(workspace):
    watch = subprocess.Popen([sys.executable, "-m", "katas", "watch", "01", "--poll"], cwd=workspace, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=interruptible)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and READY not in watch.stdout.readline():
        pass
    (workspace / "practice" / "01.py").write_text("this is ( not python\n")
    while time.monotonic() < deadline:
        line = watch.stdout.readline()
        if "syntax error" in line:
            break
    else:
        raise AssertionError("no re-check after the save")
    watch.send_signal(signal.SIGINT)
    watch.communicate(timeout=30)
    assert watch.returncode == 0


def test_a_kata_is_not_solved_by_removing_what_its_check_looks_at(tmp_path, monkeypatch):
    """Deleting the clip line makes clip-order n/a, not pass: the kata stays failing and its bug stays hidden."""
    monkeypatch.chdir(tmp_path)
    assert kata("new", "--bug", "clip-order", "--seed", "1", "--no-verify").exit_code == 0
    path = tmp_path / "practice" / "01.py"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if "clip_grad_norm_" not in line))
    checked = kata("check", "practice/01.py")
    assert checked.exit_code == 1, plain(checked)
    assert "injected bug: cannot tell" in plain(checked)
    assert "could not confirm that this kata's symptom is gone" in plain(checked)
    doc = json.loads(kata("list", "--json").output)
    assert [(k["status"], k["bug"]) for k in doc["katas"]] == [("failing", None)]
