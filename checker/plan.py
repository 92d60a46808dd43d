"""How a script is run under observation, beyond its path: its own arguments, a module run with ``-m``, and the
prefix of training to judge (``--steps N``, ``--epochs E``).

The ``kata`` process hands the plan to every observed process (the checked process, each rank, the processes the
script starts) in one environment variable, as a launcher hands them its own settings; this module does not import
torch.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

VARIABLE = "KATA_PLAN"


class PrefixReached(BaseException):
    """Raised into the script where a prefix run stops, as ``KeyboardInterrupt`` would be: a ``BaseException``, so
    that the script's own ``except Exception`` lets it through and its ``finally`` blocks run."""


@dataclass(frozen=True)
class Plan:
    args: tuple[str, ...] = ()  # the script's own arguments (``sys.argv[1:]``)
    module: str = ""  # run as ``python -m MODULE`` from ``path0`` (else the script is a file)
    path0: str = ""  # ``sys.path[0]`` of a module run: the folder ``kata check -m`` was run from
    steps: int | None = None  # stop once this many updates were made, where the next training step would begin
    epochs: int | None = None  # stop where a training DataLoader would begin its pass after this many
    imports: str = ""  # a folder on ``sys.path`` after the script's own: that of the script a kata was made from
    profile: bool = False  # time each phase of the run (``--profile``; see checker.clock)

    @property
    def prefix(self) -> bool:
        """Whether the run stops early on purpose (``--steps``, ``--epochs``)."""
        return self.steps is not None or self.epochs is not None

    def describe(self) -> str:
        """The prefix, as the options that asked for it: "--steps 200", "--epochs 1", or ""."""
        return " ".join(f"--{name} {value}" for name, value in (("steps", self.steps), ("epochs", self.epochs))
                        if value is not None)

    def environment(self) -> dict[str, str]:
        doc = {key: value for key, value in asdict(self).items() if value not in ((), "", None) and value is not False}
        return {VARIABLE: json.dumps(doc)} if doc else {}


def current() -> Plan:
    """The plan this observed process was started with (an empty plan when none was given)."""
    text = os.environ.get(VARIABLE)
    if not text:
        return Plan()
    doc = json.loads(text)
    return Plan(**{**doc, "args": tuple(doc.get("args", ()))})
