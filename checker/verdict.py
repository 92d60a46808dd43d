"""From a run to a report: judge every probe and choose the exit code.

A report is told at one of two levels. ``diagnosis`` (the default) names each
check and what caused its failure. ``symptoms`` names each check by what it
looks at and says only what was seen (for katas and interview tasks, whose
answer a cause-naming report would give away).
"""
from __future__ import annotations

import signal
from dataclasses import dataclass, field

from checker.facts import RunFacts
from checker.findings import ADVICE, ERROR, Finding
from checker.probes import BY_ID, PROBES
from checker.runner import Limits, Run

SCHEMA = "torch-katas/check/4"
DIAGNOSIS, SYMPTOMS = "diagnosis", "symptoms"
EXIT_PASS, EXIT_SYMPTOM, EXIT_USAGE, EXIT_SCRIPT_FAILED, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130


@dataclass
class Report:
    script: str
    device: str
    verdict: str  # pass | fail | script-failed | timeout | usage | interrupted
    exit_code: int
    problem: str = ""
    detail: str = ""
    findings: list[Finding] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    log_path: str = ""
    output_truncated: bool = False
    disclosure: str = DIAGNOSIS
    ran: bool = True  # False when the file could not be run at all

    def statuses(self) -> dict[str, str]:
        """Each probe's status, by probe id."""
        return {f.probe: f.status for f in self.findings}

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
            "ran": self.ran,
            "disclosure": self.disclosure,
            "probes": [f.to_json() if self.disclosure == DIAGNOSIS else symptom_json(f) for f in self.findings],
            "output_tail": self.output,
            "output_truncated": self.output_truncated,
            "log": self.log_path,
        }


def symptom_title(probe: str) -> str:
    module = BY_ID.get(probe)
    return module.SYMPTOM if module else probe


def symptom_json(f: Finding) -> dict:
    """A finding as its symptom: named by what was seen, without the probe's id or its diagnosis."""
    module = BY_ID.get(f.probe)
    doc = {"symptom": module.SYMPTOM_ID if module else f.probe, "title": symptom_title(f.probe), "status": f.status,
           "measured": f.measured, "threshold": f.threshold, "observed": f.symptom, "series": f.series}
    if f.parts:
        doc["parts"] = [symptom_json(part) for part in f.parts]
    return doc


def unusable(script: str, device: str, problem: str, detail: str, exit_code: int) -> Report:
    """The report on a file that could not be run at all (not found, not Python, empty ...)."""
    verdict = "usage" if exit_code == EXIT_USAGE else "script-failed"
    return Report(script, device, verdict, exit_code, problem, detail, ran=False)


def judge(run: Run, script: str, device: str, limits: Limits) -> Report:
    report = Report(script, device, "", 0, output=run.output, seconds=run.seconds, log_path=run.log_path,
                    output_truncated=run.output_truncated)
    problem = _run_problem(run, limits)
    if problem:
        return _set(report, *problem)
    outcome = run.record["outcome"]
    if outcome["status"] == "no-cuda":
        return _set(report, "usage", EXIT_USAGE, "--device cuda was asked for, but CUDA is not available here")
    if outcome["status"] == "exception":
        report.detail = outcome["traceback"]
        missing = outcome["error"].startswith(("ModuleNotFoundError", "ImportError"))
        hint = "; is it installed in this environment?" if missing else ""
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, f"the script raised {outcome['error']}{hint}")
    if outcome["status"] == "exit":
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, f"the script exited with status {outcome['code']}")
    facts = RunFacts.from_json(run.record["facts"])
    if not facts.backwards and not facts.updates:
        why = ("the script exited (sys.exit) before any training was observed" if outcome.get("exit_called") else
               "no training was observed: the script never called backward() or updated a parameter")
        return _set(report, "script-failed", EXIT_SCRIPT_FAILED, why)
    errors = facts.observer_errors
    for probe in PROBES:
        trouble = errors.get(probe.ID) or errors.get("session")
        if trouble or probe.ID not in run.record["observations"]:
            report.findings.append(Finding(probe.ID, probe.TITLE, ERROR,
                                           message=f"the checker could not observe this: {trouble}"))
        else:
            report.findings.append(probe.judge(probe.Observation(**run.record["observations"][probe.ID]), facts))
    failed = [f for f in report.findings if f.failed]
    if failed:
        return _set(report, "fail", EXIT_SYMPTOM, f"{len(failed)} of {len(report.findings)} checks found a symptom")
    advice = [f for f in report.findings if f.status == ADVICE]
    if advice:
        return _set(report, "pass", EXIT_PASS, f"no symptom found and the script still trains; {len(advice)} "
                    f"performance advice: {', '.join(f.probe for f in advice)}")
    return _set(report, "pass", EXIT_PASS, "no symptom found and the script still trains")


def _run_problem(run: Run, limits: Limits) -> tuple[str, int, str] | None:
    """How the run itself went wrong, if it did: (verdict, exit code, one line)."""
    if run.ended == "interrupted":
        return "interrupted", EXIT_INTERRUPTED, "interrupted: the script and everything it started were stopped"
    if run.ended == "timeout":
        return "timeout", EXIT_TIMEOUT, f"the script did not finish within {limits.timeout:g} s (--timeout)"
    if run.ended == "idle":
        return "timeout", EXIT_TIMEOUT, f"no progress for {limits.idle:g} s: is a loop unbounded? (--idle)"
    if run.ended == "memory":
        return "script-failed", EXIT_SCRIPT_FAILED, (
            f"the script used more than {limits.memory_mb:.0f} MB of memory and was stopped (--memory)")
    if run.forged:
        return "script-failed", EXIT_SCRIPT_FAILED, (
            "the result record was not written by the checker (its signature does not match): not trusted")
    if run.record is None:
        if run.returncode is not None and run.returncode < 0:
            name = signal.Signals(-run.returncode).name
            oom = " (possibly out of memory)" if name == "SIGKILL" else ""
            return "script-failed", EXIT_SCRIPT_FAILED, f"the script was killed by {name}{oom} before it finished"
        return "script-failed", EXIT_SCRIPT_FAILED, (
            f"the script ended (status {run.returncode}) before it finished, without the checker's record "
            "(os._exit or a crash?)")
    return None


def _set(report: Report, verdict: str, code: int, problem: str) -> Report:
    report.verdict, report.exit_code, report.problem = verdict, code, problem
    return report
