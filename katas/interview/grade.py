"""Grading a candidate's script: run the checker, then read its findings against the answer key."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from checker.expectation import BugStatus, Expectation
from katas.bugs import BUGS
from katas.interview import marker
from katas.interview.documents import KEY_SCHEMA, SCRIPT
from katas.interview.score import Score

SCHEMA = "torch-katas/grade/3"


class BadKey(ValueError):
    """The answer key is missing or is not one."""


@dataclass(frozen=True)
class Submission:
    """One candidate's script, and the name the grade gives them."""

    name: str
    script: Path


class Since(str, Enum):
    """What the time taken is counted from, best first."""

    HANDED_OVER = "the hand-over"  # `kata interview --start`
    FIRST_CHECK = "the first kata check"  # recorded in the candidate folder's mark
    ISSUED = "the task's generation"  # neither: the key's issued.json

    def __str__(self) -> str:
        return self.value


def count(n: float, unit: str) -> str:
    """``1 minute``, ``3 minutes``: ``n`` rounded, and the unit in the plural where it should be."""
    whole = round(n)
    return f"{whole} {unit}" + ("" if whole == 1 else "s")


@dataclass(frozen=True)
class Timing:
    """From the hand-over to the candidate's last change of the script, against the task's limit."""

    limit: int
    minutes: float | None = None
    since: Since | None = None
    unknown: str = ""  # why minutes is None

    @property
    def over(self) -> float | None:
        """Minutes past the limit; None within it, or when the time is not known."""
        return self.minutes - self.limit if self.minutes is not None and self.minutes > self.limit else None

    def __str__(self) -> str:
        if self.minutes is None:
            return f"unknown, {self.unknown} (limit {count(self.limit, 'minute')})"
        over = f", OVER the limit by {count(self.over, 'minute')}" if self.over is not None else ""
        return f"{count(self.minutes, 'minute')} of {self.limit}{over} (from {self.since} to the last change)"

    def to_json(self) -> dict:
        return {"minutes": None if self.minutes is None else round(self.minutes, 1), "limit": self.limit,
                "since": None if self.since is None else self.since.name.lower(),
                "over_by": None if self.over is None else round(self.over, 1), "unknown": self.unknown or None}


@dataclass
class Grade:
    submission: Submission
    key: dict
    report: object  # checker.verdict.Report
    timing: Timing
    bugs: list[dict] = field(default_factory=list)  # id, title, difficulty, status
    new_symptoms: list[dict] = field(default_factory=list)  # probe, message
    health: str = "n/a"
    diagnosed: list[str] | None = None  # when `kata check --diagnose` ran in the candidate folder; None: mark gone

    @property
    def script(self) -> Path:
        return self.submission.script

    @property
    def fixed(self) -> int:
        return sum(b["status"] == BugStatus.FIXED for b in self.bugs)

    @property
    def trains(self) -> bool:
        """The script still trains: the health gate passes, or fails only as the task's own run did while a planted
        bug is still there (a fix that breaks training is one after which it fails, and did not before, or still
        fails once every bug is fixed)."""
        return self.health == "pass" or (self.health == "fail" and self.key.get("health") == "fail"
                                         and self.fixed < len(self.bugs))

    @property
    def score(self) -> Score:
        return Score(len(self.bugs), self.fixed, self.trains, len(self.new_symptoms))

    @property
    def exit_code(self) -> int:
        """The check's, judged against the task's expectation (see :func:`expectation`): 0 only when every planted
        bug is fixed, nothing else fails and the script still trains all of its training."""
        return int(self.report.exit_code)

    @property
    def outcome(self) -> str:
        """How the check went, in a few words: what a table's row says of a script that did not run."""
        if self.report.verdict.ran:
            return f"checked ({self.report.verdict})"
        return f"did not run: {self.report.problem}"

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "candidate": self.submission.name,
            "script": str(self.script),
            "seed": self.key["seed"],
            "bugs": self.bugs,
            "fixed": self.fixed,
            "new_symptoms": self.new_symptoms,
            "health": self.health,
            "score": self.score.to_json(),
            "time": self.timing.to_json(),
            "diagnosed": self.diagnosed,
            "exit_code": self.exit_code,
            "check": self.report.to_json(),
        }


@dataclass
class Ungraded:
    """A submission that could not be graded (no script, or the grading itself failed): its row says why."""

    submission: Submission
    problem: str
    exit_code: int

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "candidate": self.submission.name, "script": str(self.submission.script),
                "error": self.problem, "exit_code": self.exit_code}


def load_key(key_dir: Path) -> dict:
    try:
        key = json.loads((key_dir / "key.json").read_text())
    except (OSError, ValueError) as exc:
        raise BadKey(f"no answer key at {key_dir / 'key.json'} ({exc}); pass --key PATH") from None
    if key.get("schema") != KEY_SCHEMA:
        raise BadKey(f"{key_dir / 'key.json'} is not a torch-katas answer key")
    return key


def issued_at(key_dir: Path) -> str | None:
    try:
        return json.loads((key_dir / "issued.json").read_text())["issued_at"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def timing(script: Path, key: dict, key_dir: Path) -> Timing:
    """From the hand-over (else the first check, else the task's generation) to the script's last change."""
    limit = key["minutes"]
    if hashlib.sha256(script.read_bytes()).hexdigest() == key.get("script_sha256"):
        return Timing(limit, unknown="the script was not edited")
    mark = marker.read(script.parent) or {}
    starts = [(mark.get("handed_over"), Since.HANDED_OVER), (mark.get("first_check"), Since.FIRST_CHECK),
              (issued_at(key_dir), Since.ISSUED)]
    try:
        start, since = next((datetime.fromisoformat(when), since) for when, since in starts if when)
    except (StopIteration, ValueError, TypeError):
        return Timing(limit, unknown="no hand-over is recorded")
    edited = datetime.fromtimestamp(script.stat().st_mtime, timezone.utc)
    seconds = (edited - start).total_seconds()
    if seconds < 0:
        return Timing(limit, since=since, unknown=f"the last change came before {since}")
    return Timing(limit, seconds / 60, since)


def expectation(key: dict):
    """What the candidate's script must show: every planted bug's probes pass."""
    return Expectation(frozenset(probe for b in key["bugs"] for probe in BUGS[b["id"]].probes),
                       subject="the planted bugs' symptoms")


def grade(submission: Submission, key_dir: Path, key: dict, report) -> Grade:
    """The grade of ``report``, a check of the submission's script judged against the key's :func:`expectation`."""
    script = submission.script
    result = Grade(submission, key, report, timing(script, key, key_dir), diagnosed=marker.diagnoses(script.parent))
    statuses = report.statuses()
    injected = {probe for b in key["bugs"] for probe in BUGS[b["id"]].probes}
    result.bugs = [{"id": b["id"], "title": b["title"], "difficulty": b["difficulty"],  # as measured on the task's reference
                    "status": BUGS[b["id"]].status(statuses) if report.verdict.ran else BugStatus.NOT_CHECKED}
                   for b in key["bugs"]]
    result.new_symptoms = [{"probe": f.probe, "message": f.message} for f in report.findings
                           if f.failed and f.probe not in injected and f.probe != "health"]
    result.health = statuses.get("health", "n/a")
    return result


def diagnosed(g: Grade) -> str:
    if g.diagnosed is None:
        return "unknown (the task's mark was removed from the candidate folder)"
    if not g.diagnosed:
        return "not used"
    return f"used {count(len(g.diagnosed), 'time')}, first at {g.diagnosed[0]}"


def markdown(g: Grade) -> str:
    rows = "\n".join(f"| `{b['id']}` | {b['title']} | {b['difficulty']} | {b['status']} |" for b in g.bugs)
    new = "\n".join(f"- `{s['probe']}`: {s['message']}" for s in g.new_symptoms) or "- none"
    how_far = " to the end" if g.report.ran else ""
    failure = f"\n**The script did not run{how_far}:** {g.report.problem}\n" if not g.report.verdict.ran else ""
    score = g.score
    return f"""# Interview grading report: {g.submission.name}

Script: `{g.script}` (task seed {g.key['seed']}, reference `{g.key['reference']}`).
{failure}
**Score: {score.points} of {score.maximum}** ({score.breakdown()}).

**{g.fixed} of {len(g.bugs)} bugs fixed**; health gate: **{g.health}**; time taken: {g.timing}.

| bug | title | difficulty | status |
|---|---|---|---|
{rows}

New symptoms the candidate introduced:
{new}

`kata check --diagnose` (names the causes): {diagnosed(g)}.

Checker verdict: {g.report.verdict} ({g.report.problem}).
"""


def script_of(task_dir: Path) -> Path:
    return task_dir / "candidate" / SCRIPT
