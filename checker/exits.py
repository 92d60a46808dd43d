"""The exit codes of `kata check` (and of the commands built on it), defined once."""
from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    PASS = 0  # no symptom: every check passed, gave advice, or could not tell
    SYMPTOM = 1  # a symptom is present (or a check failed to observe)
    USAGE = 2  # no such file, not a UTF-8 .py script, empty
    SCRIPT_FAILED = 3  # the script did not run as a training script (raised, crashed, exited early, never trained)
    TIMEOUT = 4  # --timeout, or no progress for --idle seconds
    INTERRUPTED = 130  # Ctrl-C: the script and all it started were stopped


EXIT_PASS, EXIT_SYMPTOM, EXIT_USAGE, EXIT_SCRIPT_FAILED, EXIT_TIMEOUT, EXIT_INTERRUPTED = Exit
