"""Grading a candidate's folder: run the checker, then read its findings against the answer key."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from checker.expectation import BugStatus, Expectation
from katas.bugs import BUGS
from katas.interview import marker
from katas.interview.documents import KEY_SCHEMA, SCRIPT

SCHEMA = "torch-katas/grade/2"


class BadKey(ValueError):
    """The answer key is missing or is not one."""


@dataclass
class Grade:
    script: Path
    key: dict
    report: object  # checker.verdict.Report
    bugs: list[dict] = field(default_factory=list)  # id, title, status
    new_symptoms: list[dict] = field(default_factory=list)  # probe, message
    health: str = "n/a"
    minutes_taken: float | None = None
    diagnosed: list[str] | None = None  # when `kata check --diagnose` ran in the candidate folder; None: mark gone

    @property
    def exit_code(self) -> int:
        """The check's, judged against the task's expectation (see :func:`expectation`): 0 only when every planted
        bug is fixed, nothing else fails and the script still trains all of its training."""
        return int(self.report.exit_code)

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "script": str(self.script),
            "seed": self.key["seed"],
            "bugs": self.bugs,
            "fixed": sum(b["status"] == "fixed" for b in self.bugs),
            "new_symptoms": self.new_symptoms,
            "health": self.health,
            "minutes_taken": None if self.minutes_taken is None else round(self.minutes_taken, 1),
            "minutes_allowed": self.key["minutes"],
            "diagnosed": self.diagnosed,
            "exit_code": self.exit_code,
            "check": self.report.to_json(),
        }


def load_key(key_dir: Path) -> dict:
    try:
        key = json.loads((key_dir / "key.json").read_text())
    except (OSError, ValueError) as exc:
        raise BadKey(f"no answer key at {key_dir / 'key.json'} ({exc}); pass --key PATH") from None
    if key.get("schema") != KEY_SCHEMA:
        raise BadKey(f"{key_dir / 'key.json'} is not a torch-katas answer key")
    return key


def minutes_taken(script: Path, key_dir: Path) -> float | None:
    """From issuing the task to the candidate's last save; None when the script was never edited."""
    try:
        issued = datetime.fromisoformat(json.loads((key_dir / "issued.json").read_text())["issued_at"])
    except (OSError, ValueError, KeyError):
        return None
    edited = datetime.fromtimestamp(script.stat().st_mtime, timezone.utc)
    seconds = (edited - issued).total_seconds()
    return seconds / 60 if seconds > 1 else None


def expectation(key: dict):
    """What the candidate's script must show: every planted bug's probes pass."""
    return Expectation(frozenset(probe for b in key["bugs"] for probe in BUGS[b["id"]].probes),
                       subject="the planted bugs' symptoms")


def grade(script: Path, key_dir: Path, report) -> Grade:
    """The grade of ``report``, a check of ``script`` judged against the key's :func:`expectation`."""
    key = load_key(key_dir)
    result = Grade(script, key, report, minutes_taken=minutes_taken(script, key_dir),
                   diagnosed=marker.diagnoses(script.parent))
    statuses = report.statuses()
    injected = {probe for b in key["bugs"] for probe in BUGS[b["id"]].probes}
    result.bugs = [{"id": b["id"], "title": b["title"],
                    "status": BUGS[b["id"]].status(statuses) if report.verdict.ran else BugStatus.NOT_CHECKED}
                   for b in key["bugs"]]
    result.new_symptoms = [{"probe": f.probe, "message": f.message} for f in report.findings
                           if f.failed and f.probe not in injected and f.probe != "health"]
    result.health = statuses.get("health", "n/a")
    return result


def markdown(g: Grade) -> str:
    rows = "\n".join(f"| `{b['id']}` | {b['title']} | {b['status']} |" for b in g.bugs)
    new = "\n".join(f"- `{s['probe']}`: {s['message']}" for s in g.new_symptoms) or "- none"
    taken = "unknown (the script was not edited)" if g.minutes_taken is None else f"{g.minutes_taken:.0f} minutes"
    diagnosed = ("unknown: the task's mark was removed from the candidate folder" if g.diagnosed is None else
                 f"used {len(g.diagnosed)} times ({', '.join(g.diagnosed)})" if g.diagnosed else "not used")
    how_far = " to the end" if g.report.ran else ""
    failure = f"\n**The script did not run{how_far}:** {g.report.problem}\n" if not g.report.verdict.ran else ""
    fixed = sum(b["status"] == "fixed" for b in g.bugs)
    return f"""# Interview grading report

Script: `{g.script}` (task seed {g.key['seed']}, reference `{g.key['reference']}`).
{failure}
**{fixed} of {len(g.bugs)} bugs fixed**; health gate: **{g.health}**; time taken: {taken} of {g.key['minutes']}.

| bug | title | status |
|---|---|---|
{rows}

New symptoms the candidate introduced:
{new}

`kata check --diagnose` (names the causes): {diagnosed}.

Checker verdict: {g.report.verdict} ({g.report.problem}).
"""


def script_of(task_dir: Path) -> Path:
    return task_dir / "candidate" / SCRIPT
