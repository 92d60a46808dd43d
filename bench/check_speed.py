"""How much `kata check` costs over starting Python and importing torch.

Times, as the median of several paired runs (each run times the three commands one
after the other, so that a slow moment of the machine hits all of them): the floor
(`python -c "import torch"`), the script on its own, and `kata check` on it. Prints
the three, their ratios to the floor, and the median of the per-run ratios of
`kata check` to the script alone. With `--nproc N` the script runs under
`torchrun --standalone --nproc-per-node N` and is checked with `kata check --nproc N`.
With `--steps N` a long job is checked on its first N updates (`kata check --steps N`), against the script alone
run with `--alone "ARGS"` for about as long (`tests/jobs/epochs.py --steps 200` against `--alone "--epochs 17"`).
Run from anywhere: `python bench/check_speed.py [--runs 5] [--script PATH] [--nproc N] [--steps N --alone ARGS]`.
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


def seconds(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", default=str(ROOT / "reference" / "classifier.py"))
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--steps", type=int, help="check the first N updates of a long job")
    parser.add_argument("--alone", default="", help="the script's own arguments when it runs alone (with --steps)")
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    script = str(Path(args.script).resolve())
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}"] if args.nproc > 1 else []
    rows = [
        ("floor: python -c 'import torch'", [sys.executable, "-c", "import torch"]),
        ("torchrun alone" if launcher else "the script alone", [sys.executable, *launcher, script,
                                                                *args.alone.split()]),
        ("kata check" + (f" --steps {args.steps}" if args.steps else ""),
         [kata, "check", *(["--nproc", str(args.nproc)] if launcher else []), script,
          *(["--steps", str(args.steps)] if args.steps else [])]),
    ]
    times: list[list[float]] = [[] for _ in rows]
    with tempfile.TemporaryDirectory() as scratch:  # the script writes its checkpoint here
        for _ in range(args.runs):
            for row, (_, command) in zip(times, rows):
                row.append(seconds(command, scratch))
    floor = statistics.median(times[0])
    print(f"median of {args.runs} paired runs, {Path(script).name}" + (f", {args.nproc} ranks" if launcher else ""))
    for (name, _), row in zip(rows, times):
        print(f"  {name:<32} {statistics.median(row):6.2f} s   {statistics.median(row) / floor:5.2f} x floor")
    ratio = statistics.median(k / a for a, k in zip(times[1], times[2]))
    print(f"  kata check / {rows[1][0]}: {ratio:.2f} (median of the per-run ratios)")


if __name__ == "__main__":
    main()
