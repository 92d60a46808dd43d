"""The task's documents: the candidate's brief, and the interviewer's answer key (Markdown and JSON)."""
from __future__ import annotations

import difflib
import hashlib

from katas import __version__
from katas.catalogue import difficulty, run_command
from katas.engine.inject import ENGINE_VERSION
from katas.interview.score import rubric
from katas.interview.symptoms import Observed
from katas.interview.task import Planted, Task

SCRIPT = "train.py"
KEY_SCHEMA = "torch-katas/interview-key/1"


def brief(task: Task, minutes: int, observed: Observed) -> str:
    """The candidate's brief: what the script is for, what its run showed (see :mod:`katas.interview.symptoms`),
    the time limit, how to run and check it."""
    symptoms = "\n".join(f"- {line}" for line in observed.symptoms)
    output = "\n".join(f"    {line}" for line in observed.output)
    printed = f"\nThe last lines it printed:\n\n{output}\n" if output else ""
    return f"""# Debugging task

`{SCRIPT}`: {task.description}

It runs, but when a colleague ran it under `kata check`, the check reported:

{symptoms}
{printed}
**Your task ({minutes} minutes):** find the causes in `{SCRIPT}` and fix them. The script must keep
doing its job: it should still train, and what it prints should end as good as a correct run's. For
each problem, be ready to explain what caused it and how you found it.

Run it:

    {run_command(task.reference, SCRIPT):<30}  # add --device cuda on a machine with a GPU

Check it (exit status 0 when no symptom is left and the script still trains):

    kata check {SCRIPT}

It reports what it observes, not what causes it. `kata check --diagnose {SCRIPT}` also names the
causes its checks point to; your interviewer will see that you used it.
"""


def fix_hunks(task: Task, context: int = 2) -> dict[int, str]:
    """For each planted bug (by index), the diff that undoes just that bug in the candidate's script."""
    before, after = task.script.splitlines(), task.solution.splitlines()
    opcodes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    owners = [None if op == "equal" else nearest(task, i1, i2) for op, i1, i2, _, _ in opcodes]
    hunks = {}
    for index in range(len(task.planted)):
        partly_fixed = [line for (op, i1, i2, j1, j2), owner in zip(opcodes, owners)
                        for line in (after[j1:j2] if owner == index else before[i1:i2])]
        diff = list(difflib.unified_diff(before, partly_fixed, n=context, lineterm=""))[2:]
        if diff:
            hunks[index] = "\n".join(diff)
    return hunks


def nearest(task: Task, i1: int, i2: int, reach: int = 3) -> int | None:
    """The planted bug whose lines are closest to lines ``i1:i2`` of the script (within ``reach``)."""
    def distance(x: int) -> int:
        return 0 if i1 <= x < i2 or i1 == i2 == x else min(abs(x - i1), abs(x - max(i1, i2 - 1)))

    scored = [(min(distance(x) for x in p.points), i) for i, p in enumerate(task.planted)]
    best = min(scored, default=None)
    return best[1] if best and best[0] <= reach else None


def where(task: Task, planted: Planted) -> str:
    lines = task.script.splitlines()
    if planted.lines:
        numbers = sorted(n + 1 for n in planted.lines)
        return f"line {numbers[0]}" if len(numbers) == 1 else f"lines {', '.join(map(str, numbers))}"
    position = planted.anchor
    return f"a line is missing just before line {position + 1} (`{lines[position].strip() if position < len(lines) else ''}`)"


def key_markdown(task: Task, minutes: int) -> str:
    hunks = fix_hunks(task)
    parts = [f"""# Answer key (keep away from the candidate)

Task seed {task.seed}, reference `{task.reference}`, difficulty {task.difficulty or "any"}, time limit
{minutes} minutes; torch-katas {__version__}, engine {ENGINE_VERSION}. Grade the candidate's folder with
`kata grade DIR`; the correct script is `solution.py` next to this file.
"""]
    for n, p in enumerate(task.planted, 1):
        questions = "\n".join(f"- {q}" for q in p.bug.follow_up)
        parts.append(f"""## Bug {n}: {p.bug.title} (`{p.bug.id}`, {difficulty(p.bug, task.reference)})

**Where:** {where(task, p)} of `{SCRIPT}` (site `{p.site}`).

**What the candidate sees:** {p.bug.observe}

**Why:** {p.bug.why}

**Fix:** {p.bug.fix}

```diff
{hunks.get(n - 1, "(see solution.py)")}
```

**`kata check` probe that shows it:** {", ".join(f"`{probe}`" for probe in p.bug.probes)}

**Follow-up questions:**
{questions}
""")
    parts.append(f"""## Scoring rubric

{rubric(len(task.planted))} Note the time taken against the limit of {minutes} minutes.
""")
    return "\n".join(parts)


def key_json(task: Task, minutes: int, health: str) -> dict:
    """The key as data; ``health``: the health gate's status in the task's own run (see Grade.trains)."""
    return {
        "schema": KEY_SCHEMA,
        "version": __version__,
        "engine": ENGINE_VERSION,
        "seed": task.seed,
        "reference": task.reference,
        "difficulty": task.difficulty,
        "minutes": minutes,
        "script_sha256": hashlib.sha256(task.script.encode()).hexdigest(),
        "health": health,
        "bugs": [{"id": p.bug.id, "title": p.bug.title, "difficulty": difficulty(p.bug, task.reference), "site": p.site,
                  "where": where(task, p)}
                 for p in task.planted],
    }
