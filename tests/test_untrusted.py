"""Untrusted scripts: every case ends with its documented exit code and message, never a pass,
leaves no process behind, and leaves the checked file (bytes and mtime) and its folder untouched."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, WORKERS, interruptible
from documented_json import Invalid, validate
from tracebacks import ERROR, FRAMES, copy_raises_deep, frames

CORPUS = ROOT / "tests" / "untrusted"
DAEMON_MARK = "kata-untrusted-daemon"

# script (or path), extra options, exit code, words the one-line problem must contain
CASES = [
    ("trains.py", [], 0, "no symptom found"),
    ("missing.py", [], 2, "does not exist"),
    (".", [], 2, "is a directory"),
    ("notes.txt", [], 2, "is not a Python script"),
    ("latin1.py", [], 2, "is not UTF-8"),
    ("empty.py", [], 2, "is empty"),
    ("syntax_error.py", [], 3, "line 3: syntax error"),
    ("import_error.py", [], 3, "ModuleNotFoundError: No module named 'torchvision_that_is_not_installed'; is it installed"),
    ("raises.py", [], 3, "the script raised FileNotFoundError: no config at config.yaml"),
    ("diverges_then_overflows.py", [], 3, "the script raised OverflowError: math range error"),
    ("never_trains.py", [], 3, "no training was observed"),
    ("refuses_hooks.py", [], 3, "the checker itself failed while observing the script (RuntimeError: this parameter "
                                "refuses hooks)"),
    ("unbounded_loop.py", ["--idle", "3"], 4, "no progress for 3 s: is a loop unbounded?"),
    ("prints_forever.py", ["--timeout", "4"], 4, "did not finish within 4 s"),
    ("memory_hog.py", ["--memory", "900"], 3, "more than 900 MB of memory"),
    ("segfaults.py", [], 3, "killed by SIGSEGV"),
    ("exits_early.py", [], 3, "exited (sys.exit) before any training was observed"),
    ("os_exit_mid_training.py", [], 3, "exited (os._exit(0)) at tiny.py:20 (in train), inside a loop and in the "
                                       "middle of a training pass"),
    ("exits_inside_its_loop.py", [], 3, "exited (sys.exit) at exits_inside_its_loop.py:18 (in <module>), inside a "
                                       "loop, while it was still training"),
    ("ends_with_sys_exit.py", [], 0, "no symptom found"),
    ("os_exit_after_training.py", [], 0, "no symptom found"),
    ("breaks_before_its_schedule_ends.py", [], 3, "long before the end its own schedule declares (OneCycleLR over "
                                                 "1600 steps, left at step 38)"),
    ("breaks_at_max_steps.py", [], 0, "no symptom found"),
    ("fake_report.py", [], 3, "exited (sys.exit) before any training"),
    ("forges_record.py", [], 3, "not written by the checker"),
    ("leaves_a_daemon.py", [], 0, "no symptom found"),
    ("floods_output.py", [], 3, "RuntimeError: done flooding"),
    ("removes_hooks.py", [], 1, "the script removed or replaced"),
    ("unpatches_backward.py", [], 1, "the script removed or replaced"),
    ("noop_step.py", [], 1, "mean training loss went from"),
]
GENERATED = {
    "notes.txt": b"print('hello')\n",
    "latin1.py": "print('café')\n".encode("latin-1"),
    "empty.py": b"\n\n",
    "syntax_error.py": b"import torch\n\nfor x in range(3)\n    print(x)\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The corpus, plus the malformed files, copied where the test can watch every byte."""
    here = tmp_path_factory.mktemp("untrusted")
    for path in CORPUS.glob("*.py"):
        (here / path.name).write_bytes(path.read_bytes())
    for name, data in GENERATED.items():
        (here / name).write_bytes(data)
    return here


def snapshot(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def leftovers(marks: list[str]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(mark in cmdline for mark in marks):
                found.append(cmdline)
    return found


def kata_check(folder: Path, name: str, options: list[str]) -> subprocess.CompletedProcess:
    target = folder if name == "." else folder / name
    return subprocess.run([sys.executable, "-m", "katas", "check", "--json", *options, str(target)],
                          capture_output=True, text=True, timeout=120, cwd=folder)


@pytest.fixture(scope="module")
def results(folder):
    before = snapshot(folder)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        done = dict(zip([c[0] for c in CASES], pool.map(lambda c: kata_check(folder, c[0], c[1]), CASES)))
    return done, before, snapshot(folder)


@pytest.mark.parametrize(("name", "options", "code", "words"), CASES, ids=[c[0] for c in CASES])
def test_case_ends_with_its_exit_code_and_message(name, options, code, words, results):
    done, _, _ = results
    result = done[name]
    assert result.returncode == code, (result.stdout[-2000:], result.stderr[-2000:])
    if result.stdout.strip():
        doc = json.loads(result.stdout)
        assert doc["exit_code"] == code
        message = doc["problem"] + " " + " ".join(p["message"] for p in doc["probes"]
                                                  for p in [p, *p.get("parts", [])])
    else:
        message = result.stderr
    assert words in message, message


def test_every_report_has_the_documented_shape(results):
    """A pass, symptoms, crashes, timeouts, files that cannot run: one shape, the one docs/json.md documents."""
    done, _, _ = results
    invalid = {}
    for name, result in done.items():
        try:
            validate(json.loads(result.stdout))
        except Invalid as exc:
            invalid[name] = str(exc)
    assert invalid == {}


def test_a_script_that_raised_after_training_began_says_what_ran_before_never_as_its_verdict(folder, results):
    """The loss climbed for 20 steps before the script's own perplexity printout overflowed: the report is still
    script-failed (exit 3), and its before_stop holds the divergence, with the step it began; a script that raised
    before training holds none."""
    done, _, _ = results
    doc = json.loads(done["diverges_then_overflows.py"].stdout)
    assert (doc["verdict"], doc["exit_code"], doc["probes"]) == ("script-failed", 3, [])
    assert [(f["probe"], f["status"]) for f in doc["before_stop"]] == [("divergence", "fail")], doc["before_stop"]
    assert "training diverged from step" in doc["before_stop"][0]["message"]
    assert json.loads(done["raises.py"].stdout)["before_stop"] == []
    shown = subprocess.run([sys.executable, "-m", "katas", "check", "diverges_then_overflows.py"], capture_output=True,
                           text=True, timeout=120, cwd=folder, env={**os.environ, "COLUMNS": "80"})
    lines = shown.stdout.splitlines()
    assert shown.returncode == 3 and "Before it stopped, the run showed:" in lines, shown.stdout
    said = lines.index("Before it stopped, the run showed:")
    assert lines[said + 1].startswith("FAIL divergence"), shown.stdout
    assert any(line.startswith("✗ the script raised OverflowError") for line in lines[said:]), shown.stdout
    assert len(lines) <= 40 and max(map(len, lines)) <= 80, shown.stdout


def test_a_prefix_run_that_raised_says_how_far_it_got(folder):
    """--steps 40 on a script that raises at its 20th update: script-failed, and the prefix it covered is there."""
    done = kata_check(folder, "diverges_then_overflows.py", ["--steps", "40"])
    doc = json.loads(done.stdout)
    assert (doc["verdict"], doc["exit_code"]) == ("script-failed", 3), doc["problem"]
    assert doc["prefix"] == {"asked": "--steps 40", "reached": False, "updates": 20, "passes": 0}, doc["prefix"]
    validate(doc)


def test_a_crash_shows_the_scripts_own_frames_only(tmp_path):
    """Cold, with the scratch folder the script runs in inside the script's own folder: what ran the script (the
    checker, runpy) is never shown, its own frames and its module's are."""
    script = copy_raises_deep(tmp_path)
    (tmp_path / "scratch").mkdir()
    result = subprocess.run([sys.executable, "-m", "katas", "check", "--json", str(script)], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ, TMPDIR=str(tmp_path / "scratch")))
    doc = json.loads(result.stdout)
    assert result.returncode == doc["exit_code"] == 3 and doc["problem"] == f"the script raised {ERROR}"
    assert frames(doc["detail"]) == FRAMES and doc["detail"].endswith(ERROR) and "runpy" not in doc["detail"]


def test_nothing_reports_pass_unless_it_trained_correctly(results):
    done, _, _ = results
    passed = {name for name, result in done.items() if result.returncode == 0}
    assert passed == {"trains.py", "leaves_a_daemon.py", "ends_with_sys_exit.py", "os_exit_after_training.py",
                      "breaks_at_max_steps.py"}


def test_no_process_is_left_running(folder, results):
    time.sleep(0.5)
    assert leftovers([str(folder), DAEMON_MARK]) == []


def test_the_checked_files_and_their_folder_are_untouched(results):
    _, before, after = results
    assert after == before


def test_flooded_output_is_truncated_with_a_pointer_to_the_full_log(results):
    done, _, _ = results
    doc = json.loads(done["floods_output.py"].stdout)
    assert doc["output_truncated"] and len(doc["output_tail"]) <= 4000
    log = Path(doc["log"])
    assert log.exists() and 20 * 2**20 <= log.stat().st_size <= 21 * 2**20
    assert b"[log truncated" in log.read_bytes()[-200:]


def test_syntax_errors_show_file_line_and_caret(folder):
    result = subprocess.run([sys.executable, "-m", "katas", "check", str(folder / "syntax_error.py")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert f'File "{folder / "syntax_error.py"}", line 3' in result.stderr
    assert "for x in range(3)\n" in result.stderr and "^" in result.stderr


def test_ctrl_c_stops_the_script_and_everything_it_started(folder):
    kata = subprocess.Popen([sys.executable, "-m", "katas", "check", str(folder / "sleeps.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not leftovers([str(folder / "sleeps.py")]):
        time.sleep(0.1)
    time.sleep(3)  # let it train and fall asleep
    kata.send_signal(signal.SIGINT)
    out, _ = kata.communicate(timeout=30)
    assert kata.returncode == 130
    assert "interrupted: the script and everything it started were stopped" in out
    assert "Stopped before the end" in out and "Edit the script" not in out
    assert leftovers([str(folder / "sleeps.py")]) == []


def test_a_break_at_a_step_budget_is_judged_on_what_ran_and_said_so(results):
    done, _, _ = results
    doc = json.loads(done["breaks_at_max_steps.py"].stdout)
    assert any(note.startswith("training stopped in the middle of a pass (epoch 3, after batch 6 of 12)")
               for note in doc["notes"]), doc["notes"]
