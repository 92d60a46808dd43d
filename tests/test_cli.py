"""The `kata check` command: exit codes, JSON, plain output, and what it must never do."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES, REFERENCES, ROOT
from tracebacks import ERROR, FRAMES, copy_raises_deep, frames

from checker.verdict import SCHEMA
from katas.cli import main


def kata(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_help_teaches_usage_and_exit_codes():
    result = kata("check", "--help")
    assert result.exit_code == 0
    for words in ("--device", "--timeout", "--json", "Exit codes", "health gate", "never from its text"):
        assert words in result.output


def test_json_report_is_versioned_and_complete():
    result = kata("check", "--json", str(FIXTURES / "grads_accumulate__broken.py"))
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["schema"] == SCHEMA
    assert doc["verdict"] == "fail" and doc["exit_code"] == 1
    assert doc["disclosure"] == "diagnosis" and doc["ran"] is True  # a script of one's own gets the diagnosis
    probes = {p["probe"]: p for p in doc["probes"]}
    assert probes["grads-accumulate"]["status"] == "fail"
    assert probes["grads-accumulate"]["series"]["parameters whose applied gradient was not this step's, per update"][1:] \
        == [12] * 47
    assert {"measured", "threshold", "message"} <= probes["health"].keys()
    assert [p["title"] for p in probes["health"]["parts"]][0] == "training ran"


def test_plain_output_without_a_terminal_names_the_symptom_and_the_next_command():
    script = FIXTURES / "graphs_retained__broken.py"
    result = kata("check", str(script), env={"NO_COLOR": "1", "COLUMNS": "160"})
    assert result.exit_code == 1
    assert "\x1b[" not in result.output
    text = " ".join(result.output.split())
    assert "FAIL graphs-retained" in text
    assert "grew at" in text and "steps in a row" in text
    assert f"run kata check {script} again" in text


def test_missing_path_is_a_usage_error(tmp_path):
    result = kata("check", str(tmp_path / "nope.py"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_json_prints_a_document_whatever_happened(tmp_path):
    """A file that cannot run at all still gets a JSON report on stdout, with its exit code."""
    cases = [("nope.py", None, 2, "does not exist"), ("broken.py", "import torch\nx = (\n", 3, "syntax error"),
             ("empty.py", "\n", 2, "is empty")]
    for name, text, code, problem in cases:
        path = tmp_path / name if text is None else write(tmp_path, name, text)
        result = CliRunner().invoke(main, ["check", "--json", str(path)])
        doc = json.loads(result.stdout)
        assert result.exit_code == doc["exit_code"] == code, result.output
        assert doc["ran"] is False and doc["probes"] == [] and problem in doc["problem"]


def test_cuda_without_cuda_is_a_usage_error():
    result = kata("check", "--device", "cuda", str(REFERENCES / "binary.py"))
    assert result.exit_code == 2
    assert "CUDA is not available" in result.output
    assert "without --device cuda" in result.output and "Edit the script" not in result.output


def test_exception_in_the_script_exits_3_with_its_own_frames(tmp_path, monkeypatch):
    """The scratch folder the script runs in, inside the script's own: runpy's frames would pass for the script's."""
    script = copy_raises_deep(tmp_path)
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "scratch"))
    result = kata("check", str(script), env={"COLUMNS": "240"})  # the temporary path on one line
    assert result.exit_code == 3
    assert frames(result.output) == FRAMES and ERROR in result.output
    assert "runpy" not in result.output and "harness" not in result.output


def test_nonzero_exit_is_a_script_failure(tmp_path):
    result = kata("check", str(write(tmp_path, "quit.py", "import sys\nsys.exit(5)\n")))
    assert result.exit_code == 3
    assert "exited with status 5" in result.output


def test_timeout_exits_4_and_says_so(tmp_path):
    result = kata("check", "--timeout", "2", "--json", str(write(tmp_path, "spin.py", "while True:\n    print(1)\n")))
    assert result.exit_code == 4
    doc = json.loads(result.output)
    assert doc["verdict"] == "timeout" and "did not finish within 2 s" in doc["problem"]


def test_a_script_that_never_trains_is_reported_as_such(tmp_path):
    result = kata("check", "--json", str(write(tmp_path, "idle.py", "import torch\nprint(torch.ones(2))\n")))
    assert result.exit_code == 3
    assert "no training was observed" in json.loads(result.output)["problem"]


HAND_GRADIENTS = """\
import torch
x = torch.linspace(-1, 1, 64)
w = torch.zeros(())
for step in range(100):
    w -= 0.1 * (2 * (w * x - 3 * x) * x).mean()  # the gradient of the squared error, worked out by hand
print(float(w))
"""


def test_a_script_that_trains_without_autograd_is_not_told_it_was_stopped(tmp_path):
    result = kata("check", str(write(tmp_path, "by_hand.py", HAND_GRADIENTS)))
    assert result.exit_code == 3
    assert "no training was observed" in result.output and "Nothing stopped the script" in result.output
    assert "Fix what stopped the script" not in result.output


def test_checking_never_touches_the_file_or_its_folder(tmp_path):
    script = write(tmp_path, "train.py", (FIXTURES / "baseline.py").read_text().replace("import kit", "import kit  # local"))
    (tmp_path / "kit.py").write_text((FIXTURES / "kit.py").read_text())
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    result = kata("check", str(script))
    assert result.exit_code == 0, result.output
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert after == before  # nothing written, not even __pycache__


def test_the_kata_process_never_imports_torch():
    code = (
        "import sys\nfrom katas.cli import main\n"
        f"try:\n    main(['check', '--json', {str(REFERENCES / 'binary.py')!r}])\n"
        "except SystemExit:\n    pass\n"
        "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "torch imported: False" in out.stderr
    assert json.loads(out.stdout)["verdict"] == "pass"


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme
    assert "pytest" in ci and os.access(ROOT / ".ci" / "run", os.X_OK)
