"""From a run to a report: judge every probe and choose the exit code."""
from __future__ import annotations

import signal
from dataclasses import dataclass, field

from checker.findings import ERROR, Finding
from checker.probes import PROBES
from checker.runner import Run

SCHEMA = "torch-katas/check/1"
EXIT_PASS, EXIT_SYMPTOM, EXIT_USAGE, EXIT_SCRIPT_FAILED, EXIT_TIMEOUT = 0, 1, 2, 3, 4


@dataclass
class Report:
    script: str
    device: str
    verdict: str  # pass | fail | script-failed | timeout | usage
    exit_code: int
    problem: str = ""
    detail: str = ""
    findings: list[Finding] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "script": self.script,
            "device": self.device,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "problem": self.problem,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
            "probes": [f.to_json() for f in self.findings],
            "output_tail": self.output,
        }


def judge(run: Run, script: str, device: str, timeout: float) -> Report:
    report = Report(script, device, "", 0, output=run.output, seconds=run.seconds)
    record = run.record
    if run.timed_out:
        return _set(report, "timeout", EXIT_TIMEOUT, f"the script did not finish within {timeout:g} s")
    if record is None:
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, _why_no_record(run.returncode))
    outcome = record["outcome"]
    if outcome["status"] == "no-cuda":
        return _set(report, "usage", EXIT_USAGE, "--device cuda was asked for, but CUDA is not available here")
    if outcome["status"] == "exception":
        report.detail = outcome["traceback"]
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, f"the script raised {outcome['error']}")
    if outcome["status"] == "exit":
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, f"the script exited with status {outcome['code']}")
    facts = record["facts"]
    errors = facts["observer_errors"]
    for probe in PROBES:
        if probe.ID in errors or probe.ID not in record["observations"]:
            report.findings.append(Finding(probe.ID, probe.TITLE, ERROR,
                                           message=f"the checker could not observe this: {errors.get(probe.ID)}"))
        else:
            report.findings.append(probe.judge(record["observations"][probe.ID], facts))
    failed = [f for f in report.findings if f.failed]
    if failed:
        return _set(report, "fail", EXIT_SYMPTOM, f"{len(failed)} of {len(report.findings)} checks found a symptom")
    return _set(report, "pass", EXIT_PASS, "no symptom found and the script still trains")


def _set(report: Report, verdict: str, code: int, problem: str) -> Report:
    report.verdict, report.exit_code, report.problem = verdict, code, problem
    return report


def _why_no_record(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        return f"the script was killed by {name} before it finished"
    return f"the script ended (status {returncode}) before it finished, without the checker's record"
