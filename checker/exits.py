"""The exit codes of `kata check` (and of the commands built on it), defined once."""
from __future__ import annotations

from enum import Enum, IntEnum


class Exit(IntEnum):
    PASS = 0  # no symptom: every check passed, gave advice, or could not tell
    SYMPTOM = 1  # a symptom is present (or a check failed to observe)
    USAGE = 2  # no such file, not a UTF-8 .py script, empty
    SCRIPT_FAILED = 3  # the script did not run as a training script (raised, crashed, exited early, never trained)
    TIMEOUT = 4  # --timeout, or no progress for --idle seconds
    INTERRUPTED = 130  # Ctrl-C: the script and all it started were stopped


EXIT_PASS, EXIT_SYMPTOM, EXIT_USAGE, EXIT_SCRIPT_FAILED, EXIT_TIMEOUT, EXIT_INTERRUPTED = Exit


class Verdict(str, Enum):
    """What a check concluded; its exit code follows from it (:attr:`exit_code`). A ``str`` as well, so that a
    report read back from JSON compares equal and prints as its value."""

    PASS = "pass"
    FAIL = "fail"  # a symptom
    USAGE = "usage"
    SCRIPT_FAILED = "script-failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def exit_code(self) -> Exit:
        return EXIT_OF[self]

    @property
    def ran(self) -> bool:
        """The script ran to its end and was judged (pass or fail), as opposed to a run that went wrong."""
        return self in (Verdict.PASS, Verdict.FAIL)


EXIT_OF = {Verdict.PASS: Exit.PASS, Verdict.FAIL: Exit.SYMPTOM, Verdict.USAGE: Exit.USAGE,
           Verdict.SCRIPT_FAILED: Exit.SCRIPT_FAILED, Verdict.TIMEOUT: Exit.TIMEOUT,
           Verdict.INTERRUPTED: Exit.INTERRUPTED}
