"""How much `kata check` costs over starting Python and importing torch.

Times, as the median of several runs: the floor (`python -c "import torch"`), the
reference script on its own, and `kata check` on it. Prints the three and their
ratios to the floor. Run from anywhere: `python bench/check_speed.py [--runs 5]`.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(command: list[str], runs: int, cwd: str) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", default=str(ROOT / "reference" / "classifier.py"))
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    with tempfile.TemporaryDirectory() as scratch:  # the script writes its checkpoint here
        rows = [
            ("floor: python -c 'import torch'", [sys.executable, "-c", "import torch"]),
            ("the script alone", [sys.executable, args.script]),
            ("kata check", [kata, "check", args.script]),
        ]
        results = [(name, median_seconds(cmd, args.runs, scratch)) for name, cmd in rows]
    floor = results[0][1]
    print(f"median of {args.runs} runs, {Path(args.script).name}")
    for name, seconds in results:
        print(f"  {name:<32} {seconds:6.2f} s   {seconds / floor:5.2f} x floor")


if __name__ == "__main__":
    main()
