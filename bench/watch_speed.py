"""Re-check latency of `kata watch` after a save, against a cold `kata check` of the same file.

Starts `kata watch` on a copy of the script and times its first line and its
first report; then, for each run, saves the copy and times the save until the
watch reports again, and right after times a cold `kata check` of it. A save
and the cold check that follows form a pair, run under the same load, so the
median of the pairs' ratios holds on a machine shared with other jobs, where
the medians of either alone swing. Aim: a ratio under a third.
Run from anywhere: `python bench/watch_speed.py [--runs 5] [--script PATH]`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = "save to re-check"  # the end of each of `kata watch`'s reports


def wait_for(proc: subprocess.Popen, words: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("kata watch ended early")
        if words in line:
            return
    raise TimeoutError(f"kata watch did not say {words!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", default=str(ROOT / "reference" / "classifier.py"))
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    pairs = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "train.py"
        shutil.copy(args.script, script)
        launched = time.monotonic()
        watch = subprocess.Popen([kata, "watch", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, cwd=folder, env={**os.environ, "NO_COLOR": "1"})
        wait_for(watch, "starting")
        first_line = time.monotonic() - launched
        wait_for(watch, READY)
        first_report = time.monotonic() - launched
        for n in range(args.runs):
            time.sleep(0.5)
            started = time.monotonic()
            with open(script, "a") as f:
                f.write(f"# save {n}\n")
            wait_for(watch, READY)
            warm = time.monotonic() - started
            started = time.monotonic()
            subprocess.run([kata, "check", str(script)], stdout=subprocess.DEVNULL, cwd=folder, check=False)
            pairs.append((warm, time.monotonic() - started))
            print(f"  pair {n + 1}: save to report {warm:6.2f} s, cold check {pairs[-1][1]:6.2f} s", flush=True)
        watch.send_signal(signal.SIGINT)
        try:
            watch.wait(120)  # a loaded machine takes a while to end the warm server
        except subprocess.TimeoutExpired:
            watch.kill()
    print(f"{Path(args.script).name}, {args.runs} pairs (a save, then a cold check); medians")
    print(f"  kata watch, first line          {first_line:6.2f} s")
    print(f"  kata watch, first report        {first_report:6.2f} s")
    print(f"  kata watch, save to report      {statistics.median(w for w, _ in pairs):6.2f} s")
    print(f"  kata check, cold                {statistics.median(c for _, c in pairs):6.2f} s")
    print(f"  ratio, per pair                 {statistics.median(w / c for w, c in pairs):6.2f}")


if __name__ == "__main__":
    main()
