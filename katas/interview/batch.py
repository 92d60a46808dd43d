"""Several candidates of one task: their submissions graded side by side, then put in one table (Markdown, CSV).

A submission is a script and a name (:class:`katas.interview.grade.Submission`), wherever it came from: a
candidate folder, or a file among others. Each is checked in its own thread (the checks themselves run in
separate processes), so that a submission that hangs (stopped by the check's limits) or crashes, or whose grading
fails, costs only its own row, which says why.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from checker.exits import EXIT_SCRIPT_FAILED, EXIT_USAGE
from katas.interview.documents import SCRIPT
from katas.interview.grade import Grade, Submission, Ungraded, count, grade, markdown

Graded = Grade | Ungraded


def grade_all(submissions: list[Submission], key_dir: Path, key: dict, check: Callable[[Path], object],
              jobs: int) -> list[Graded]:
    """Each submission's grade, in the order given, ``jobs`` at a time; ``check``: a script's report."""
    def one(submission: Submission) -> Graded:
        if not submission.script.is_file():
            return Ungraded(submission, f"no {SCRIPT} at {submission.script}", EXIT_USAGE)
        try:
            return grade(submission, key_dir, key, check(submission.script))
        except Exception as exc:  # one submission's failure must not lose the others' grades
            return Ungraded(submission, f"grading failed: {type(exc).__name__}: {exc}", EXIT_SCRIPT_FAILED)

    if len(submissions) == 1 or jobs == 1:  # in this thread, where Ctrl-C stops the check as `kata check` does
        return [one(submission) for submission in submissions]
    with ThreadPoolExecutor(max_workers=min(jobs, len(submissions))) as pool:
        return list(pool.map(one, submissions))


def exit_code(grades: list[Graded]) -> int:
    """The worst of the grades' exit codes: 0 only when every candidate fixed every bug and broke nothing."""
    return max((g.exit_code for g in grades), default=0)


def bug_header(bug: dict) -> str:
    return f"{bug['id']} ({bug['difficulty']})"


def cells(g: Graded, key: dict) -> dict[str, str]:
    """One candidate's row, by column, as the Markdown table and the terminal show it."""
    bug_columns = [bug_header(b) for b in key["bugs"]]
    if isinstance(g, Ungraded):
        return {"candidate": g.submission.name, "score": "—", "fixed": "—", **dict.fromkeys(bug_columns, "—"),
                "new symptoms": "—", "trains": "—", "time": "—", "--diagnose": "—", "outcome": g.problem}
    score = g.score
    time = "unknown" if g.timing.minutes is None else f"{count(g.timing.minutes, 'minute')} of {g.timing.limit}"
    if g.timing.over is not None:
        time += f", OVER by {count(g.timing.over, 'minute')}"
    used = "?" if g.diagnosed is None else str(len(g.diagnosed))
    return {"candidate": g.submission.name, "score": f"{score.points} of {score.maximum}",
            "fixed": f"{g.fixed} of {len(g.bugs)}",
            **{bug_header(b): str(b["status"]) for b in g.bugs},
            "new symptoms": str(len(g.new_symptoms)), "trains": trains(g), "time": time,
            "--diagnose": used, "outcome": g.outcome}


def trains(g: Grade) -> str:
    return "yes" if g.trains else "no" if g.report.verdict.ran else "—"


def columns(key: dict) -> list[str]:
    return ["candidate", "score", "fixed", *(bug_header(b) for b in key["bugs"]), "new symptoms", "trains", "time",
            "--diagnose", "outcome"]


def markdown_table(grades: list[Graded], key: dict) -> str:
    header = columns(key)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for g in grades:
        row = cells(g, key)
        lines.append("| " + " | ".join(row[c].replace("|", "\\|") for c in header) + " |")
    return "\n".join(lines)


def markdown_report(grades: list[Graded], key: dict) -> str:
    """The table, then each graded candidate's report."""
    details = "\n".join("#" + markdown(g) for g in grades if isinstance(g, Grade))  # each report a section
    return f"""# Interview grades: task seed {key['seed']}, reference `{key['reference']}`

Score: fix points less new symptoms, of the rubric's maximum (key.md); explanations and follow-ups are added in
the interview.

{markdown_table(grades, key)}

{details}"""


CSV_FIELDS = ("candidate", "script", "points", "maximum", "fixed", "bugs")
CSV_TAIL = ("new_symptoms", "trains", "minutes", "limit", "over_by", "since", "diagnosed", "exit_code", "outcome")


def csv_text(grades: list[Graded], key: dict) -> str:
    """One row per candidate; a column per planted bug (its status); numbers as numbers, empty where unknown."""
    ids = [b["id"] for b in key["bugs"]]
    out = io.StringIO()
    writer = csv.DictWriter(out, [*CSV_FIELDS, *ids, *CSV_TAIL], lineterminator="\n")
    writer.writeheader()
    for g in grades:
        row = {"candidate": g.submission.name, "script": str(g.submission.script), "bugs": len(ids),
               "exit_code": g.exit_code}
        if isinstance(g, Ungraded):
            row["outcome"] = g.problem
        else:
            score, time = g.score, g.timing.to_json()
            row.update(points=score.points, maximum=score.maximum, fixed=g.fixed, new_symptoms=len(g.new_symptoms),
                       trains=trains(g), minutes=time["minutes"], limit=time["limit"],
                       over_by=time["over_by"], since=time["since"], outcome=g.outcome,
                       diagnosed="" if g.diagnosed is None else len(g.diagnosed),
                       **{b["id"]: str(b["status"]) for b in g.bugs})
        writer.writerow(row)
    return out.getvalue()

