"""Re-check latency of `kata watch` after a save, against a cold `kata check` of the same file.

Starts `kata watch` on a copy of the script, saves the copy several times and
times each save until the watch reports again; then times cold `kata check`
runs. Prints the medians and their ratio (aim: under a third).
Run from anywhere: `python bench/watch_speed.py [--runs 5] [--script PATH]`.
"""
from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = "watching for changes"


def wait_for_report(proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("kata watch ended early")
        if READY in line:
            return
    raise TimeoutError("no report from kata watch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", default=str(ROOT / "reference" / "classifier.py"))
    args = parser.parse_args()
    kata = shutil.which("kata") or sys.exit("kata is not installed in this environment")
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "train.py"
        shutil.copy(args.script, script)
        watch = subprocess.Popen([kata, "watch", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, cwd=folder)
        wait_for_report(watch)
        latencies = []
        for n in range(args.runs):
            time.sleep(0.5)
            started = time.monotonic()
            with open(script, "a") as f:
                f.write(f"# save {n}\n")
            wait_for_report(watch)
            latencies.append(time.monotonic() - started)
        watch.send_signal(signal.SIGINT)
        watch.wait(30)
        cold = []
        for _ in range(args.runs):
            started = time.monotonic()
            subprocess.run([kata, "check", str(script)], stdout=subprocess.DEVNULL, cwd=folder, check=False)
            cold.append(time.monotonic() - started)
    warm, cold_median = statistics.median(latencies), statistics.median(cold)
    print(f"median of {args.runs} runs, {Path(args.script).name}")
    print(f"  kata watch, save to report   {warm:6.2f} s")
    print(f"  kata check, cold             {cold_median:6.2f} s")
    print(f"  ratio                        {warm / cold_median:6.2f}")


if __name__ == "__main__":
    main()
