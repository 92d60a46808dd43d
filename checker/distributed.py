"""Where a checked process stands in a distributed run: the channel's per-rank names, the launcher's
environment, and which updates the cross-rank probes sample. Imports nothing of the checker, so that the
instrumentation, the probes, the runner and the entry points can all read it.
"""
from __future__ import annotations

import os

KEY, STOPPED, COLLECTIVE, FORKED = "key", "stopped", "collective", "forked"
SPAWNED = "KATA_SPAWNED_RANK"  # set in a rank the checked script started itself


def rank_dir(channel: str, rank: int) -> str:
    return os.path.join(channel, f"rank-{rank}")


def launcher_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """What ``torchrun --standalone --nproc-per-node WORLD`` puts in a worker's environment, for ranks forked
    without it (the warm checker), whose rendezvous store listens on ``port`` of the loopback."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_NAME": "default", "ROLE_WORLD_SIZE": str(world),
            "GROUP_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_RUN_ID": "kata",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def launched() -> bool:
    """Whether this process was started as one rank of a distributed job (a launcher set its rank)."""
    return ("RANK" in os.environ and "WORLD_SIZE" in os.environ) or SPAWNED in os.environ


def sampled(ordinal: int) -> bool:
    """Whether the cross-rank probes record their figures at the ``ordinal``-th update (1-based): every one of the
    first 64, then every 16th, so that long runs stay cheap."""
    return ordinal <= 64 or ordinal % 16 == 0
