"""One rank of a distributed run: ``python -m checker.ranks SCRIPT DEVICE CHANNEL_DIR``, started by the launcher.

``kata check --nproc N`` runs PyTorch's own launcher (``torch.distributed.run``),
which starts this module once per rank with ``RANK``, ``WORLD_SIZE`` and the
rendezvous in its environment, exactly as it would start the script. Each rank
observes the script as the single-process harness does and writes its own signed
record to ``CHANNEL_DIR/rank-R``. Its signing key waits there in a file the
``kata`` process wrote, read and deleted before torch (and so before the script)
is imported. While the rank waits in a collective called from Python, the name of
that collective is in ``rank-R/collective`` (for a report on a rank that hangs);
a rank the launcher stops (it does so when another rank fails) leaves
``rank-R/stopped``.
"""
from __future__ import annotations

import os
import signal
import sys

KEY, STOPPED, COLLECTIVE = "key", "stopped", "collective"


def rank_dir(channel: str, rank: int) -> str:
    return os.path.join(channel, f"rank-{rank}")


def _stopped(channel_dir: str):
    def handler(signum: int, frame) -> None:
        try:
            with open(os.path.join(channel_dir, STOPPED), "w") as f:
                f.write(signal.Signals(signum).name)
        finally:
            os._exit(128 + signum)

    return handler


def main() -> None:
    script, device, channel = sys.argv[1:4]
    own = rank_dir(channel, int(os.environ["RANK"]))
    path = os.path.join(own, KEY)
    with open(path) as f:
        key = f.read().strip()
    os.unlink(path)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    signal.signal(signal.SIGTERM, _stopped(own))

    from checker import harness

    harness.prepare()
    harness.check(script, device, own, key)


def launched() -> bool:
    """Whether this process was started as one rank of a distributed job (a launcher set its rank)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def sampled(ordinal: int) -> bool:
    """Whether the cross-rank probes record their figures at the ``ordinal``-th update (1-based): every one of the
    first 64, then every 16th, so that long runs stay cheap."""
    return ordinal <= 64 or ordinal % 16 == 0


if __name__ == "__main__":
    main()
