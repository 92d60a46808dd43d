"""The checker never changes what a script does, whatever kind of tensor it trains on.

``tests/exotic/tensor_kinds.py`` hands modules, losses and optimizers sparse (COO, CSR), nested (strided and
jagged), quantized, meta and complex tensors, runs ``torch.func`` transforms, ``__torch_function__`` and wrapper
subclasses, odd batches and DataLoaders of dicts, strings and nested tensors. Run plainly and under the checker,
it must print the same results, and no probe may break on what it saw.
"""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, check

from checker.findings import ERROR

SCRIPT = ROOT / "tests" / "exotic" / "tensor_kinds.py"


def results(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("RESULT ")]


def test_the_checked_run_prints_what_the_plain_run_prints_and_no_probe_breaks():
    plain = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert plain.returncode == 0, plain.stderr
    expected = results(plain.stdout)
    assert len(expected) >= 20 and not any(" raised " in line for line in expected), expected
    report = check(SCRIPT)
    assert report.ran and report.verdict in ("pass", "fail"), f"{report.problem}\n{report.output}"
    assert results(report.output) == expected
    broken = {f.probe: f.message for f in report.findings if f.status == ERROR}
    assert not broken, broken
