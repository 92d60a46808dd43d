"""How long `kata new` takes, against the floor of importing libcst.

Times, as the median of several runs, `python -c "import libcst"`, `kata new --no-verify` with `--bug leak` (one
reference parsed) and without (a random bug: every reference parsed), and `kata new --bug leak` as it runs by
default: the kata and the correct script under `kata check`, side by side, when nothing is cached, and with the
correct script's run cached (a second kata from the same reference and seed). Each row has a cache folder of its
own (XDG_CACHE_HOME). Run from anywhere: `python bench/new_speed.py [--runs 5]`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def median_seconds(command: list[str], runs: int, cache: str | None = None) -> float:
    """``cache``: a cache folder kept from run to run (filled by an untimed run first); None: a fresh one each run."""
    if cache is not None:
        once(command, cache)
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as fresh:
            started = time.perf_counter()
            once(command, cache or fresh)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def once(command: list[str], cache: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([*command, "--dir", folder] if command[0] != sys.executable else command,
                       env={**os.environ, "XDG_CACHE_HOME": cache}, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    leak = [kata, "new", "--bug", "leak", "--seed", "1"]
    with tempfile.TemporaryDirectory() as cached:
        results = [
            ("floor: python -c 'import libcst'", median_seconds([sys.executable, "-c", "import libcst"], args.runs)),
            ("kata new --bug leak --seed 1 --no-verify", median_seconds([*leak, "--no-verify"], args.runs)),
            ("kata new --seed 1 --no-verify", median_seconds([kata, "new", "--seed", "1", "--no-verify"], args.runs)),
            ("kata new --bug leak --seed 1, nothing cached", median_seconds(leak, args.runs)),
            ("kata new --bug leak --seed 1, correct run cached", median_seconds(leak, args.runs, cached)),
        ]
    floor = results[0][1]
    print(f"median of {args.runs} runs")
    for name, seconds in results:
        print(f"  {name:<50} {seconds:6.2f} s   {seconds / floor:5.2f} x floor")


if __name__ == "__main__":
    main()
