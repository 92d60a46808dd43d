"""The checked process: ``python -m checker.checked SCRIPT DEVICE CHANNEL_DIR`` (signing key on stdin).

Installs the observers (:mod:`checker.harness`), runs the script as ``__main__`` (as ``python SCRIPT`` would,
with ``KATA_DEVICE`` set), then writes what it saw, signed, to ``CHANNEL_DIR/record.json``. Outside a
distributed launch, the processes the script starts itself are observed too (:mod:`checker.spawned`). The warm
server (:mod:`checker.warm`) and each rank (:mod:`checker.ranks`) call :func:`check` the same way.
"""
from __future__ import annotations

import os
import sys

from checker import harness, record, spawned
from checker.distributed import launched


def check(script: str, device: str, channel_dir: str, key: str) -> dict:
    """Observe one run of ``script`` in this process and write the signed record to ``channel_dir``; returns how
    the script ended."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        outcome = {"status": "no-cuda"}
        record.write(channel_dir, {"schema": record.SCHEMA, "complete": True, "outcome": outcome}, key)
        return outcome
    return harness.observe(lambda: harness.run_script(script, device), device, channel_dir, key,
                           spawns=None if launched() else spawned.observe_spawned)


def main() -> None:
    script, device, channel_dir = sys.argv[1:4]
    key = sys.stdin.readline().strip()  # read before the script can; stdin is then empty
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    harness.prepare()
    check(script, device, channel_dir, key)


if __name__ == "__main__":
    main()
