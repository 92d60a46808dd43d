"""How long `kata new` takes, against the floor of importing libcst.

Times, as the median of several runs, `python -c "import libcst"`, `kata new
--bug leak` (one reference parsed) and a plain `kata new` (a random bug: both
references parsed). Run from anywhere: `python bench/new_speed.py [--runs 5]`.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            subprocess.run([*command, "--dir", folder] if command[0] != sys.executable else command,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    rows = [
        ("floor: python -c 'import libcst'", [sys.executable, "-c", "import libcst"]),
        ("kata new --bug leak --seed 1", [kata, "new", "--bug", "leak", "--seed", "1"]),
        ("kata new --seed 1", [kata, "new", "--seed", "1"]),
    ]
    results = [(name, median_seconds(cmd, args.runs)) for name, cmd in rows]
    floor = results[0][1]
    print(f"median of {args.runs} runs")
    for name, seconds in results:
        print(f"  {name:<34} {seconds:6.2f} s   {seconds / floor:5.2f} x floor")


if __name__ == "__main__":
    main()
