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
``rank-R/stopped``. Ranks a checked script starts itself with
``torch.multiprocessing.spawn`` are observed the same way (:mod:`checker.spawned`);
the warm checker forks ranks with the environment the launcher would give them
(:func:`checker.distributed.launcher_environment`).
"""
from __future__ import annotations

import os
import signal
import sys

from checker.distributed import KEY, STOPPED, rank_dir

_exit = os._exit  # the real one: a checked script's ``os._exit`` writes its record first


def _stopped(channel_dir: str):
    def handler(signum: int, frame) -> None:
        try:
            with open(os.path.join(channel_dir, STOPPED), "w") as f:
                f.write(signal.Signals(signum).name)
        finally:
            _exit(128 + signum)

    return handler


def observe_rank(script: str, device: str, own: str, key: str) -> int:
    """Observe this rank's run of the script (torch and the observers already imported). Returns the exit status
    the rank would have had on its own (1 when the script raised), so that the launcher, as without the checker,
    stops the other ranks when one fails instead of leaving them waiting for it."""
    from checker import checked

    signal.signal(signal.SIGTERM, _stopped(own))
    outcome = checked.check(script, device, own, key)
    return {"exception": 1, "exit": outcome.get("code", 1)}.get(outcome["status"], 0)


def main() -> None:
    script, device, channel = sys.argv[1:4]
    own = rank_dir(channel, int(os.environ["RANK"]))
    path = os.path.join(own, KEY)
    with open(path) as f:
        key = f.read().strip()
    os.unlink(path)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

    from checker import harness

    harness.prepare()
    sys.exit(observe_rank(script, device, own, key))


if __name__ == "__main__":
    main()
