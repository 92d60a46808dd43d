"""From a run to a report: judge every probe and choose the exit code.

A report is told at one of two levels. ``diagnosis`` (the default) names each
check and what caused its failure. ``symptoms`` names each check by what it
looks at and says only what was seen (for katas and interview tasks, whose
answer a cause-naming report would give away).
"""
from __future__ import annotations

import difflib
import signal
from dataclasses import dataclass, field

from checker.exits import EXIT_USAGE, Exit, Verdict
from checker.expectation import BugStatus, Expectation
from checker.facts import RunFacts
from checker.findings import ADVICE, CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.plan import Plan
from checker.probes import BY_ID, PROBES
from checker.runner import Limits, RankRun, Run

SCHEMA = "torch-katas/check/8"  # its fields: docs/json.md; bumped whenever they change
STANDS_CUT_SHORT = ("divergence", "non-finite")  # probes judged on a run that raised (see before_stop)
DIAGNOSIS, SYMPTOMS = "diagnosis", "symptoms"


@dataclass
class Report:
    script: str
    device: str
    verdict: Verdict
    problem: str = ""
    detail: str = ""
    findings: list[Finding] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    log_path: str = ""
    output_truncated: bool = False
    disclosure: str = DIAGNOSIS
    ran: bool = True  # False when the script was never started (an unusable file, --device cuda without CUDA)
    nproc: int = 1  # ranks launched (1: a single process)
    notes: list[str] = field(default_factory=list)  # what happened beside the verdict (processes left running)
    stopped: dict | None = None  # where a break left training in the middle of a pass (see RunFacts.stopped)
    prefix: dict | None = None  # a prefix run (--steps, --epochs): what was asked, whether it was reached, what ran
    kata: BugStatus | None = None  # judged against an Expectation (a kata's bug, a task's bugs): their status
    before_stop: list[Finding] = field(default_factory=list)  # a script that raised: the symptoms of what ran before
    # (a divergence that ended in the script's own OverflowError), never a verdict
    profile: dict | None = None  # a profiled run (--profile): seconds per phase up to its last update (rank 0's)

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    @property
    def exit_code(self) -> Exit:
        return self.verdict.exit_code

    def statuses(self) -> dict[str, str]:
        """Each probe's status, by probe id."""
        return {f.probe: f.status for f in self.findings}

    @property
    def clean(self) -> bool:
        """The script ran as a training script and showed no symptom (advice and "cannot tell" allowed)."""
        return self.exit_code == Exit.PASS

    @property
    def failures(self) -> list[Finding]:
        """The checks that found a symptom (or failed to observe)."""
        return [f for f in self.findings if f.failed]

    def finding(self, probe: str) -> Finding:
        """One check's finding, by its probe id (``zero-grad``) or the id of the symptom it looks at."""
        for f in self.findings:
            known = BY_ID.get(f.probe)
            if probe in (f.probe, known.symptom_id if known else None):
                return f
        close = difflib.get_close_matches(probe, [f.probe for f in self.findings], n=1)
        raise KeyError(f"no check `{probe}` in this report" + (f"; did you mean `{close[0]}`?" if close else "")
                       + (f" ({self.problem})" if not self.findings and self.problem else ""))

    def summary(self) -> str:
        """Plain text: the verdict, what went wrong with the run, each failing check with its evidence."""
        lines = [f"{self.script}: {self.verdict}" + (f": {self.problem}" if self.problem else "")]
        for f in self.failures:
            evidence = f" ({f.measured}; expected {f.threshold})" if f.measured and f.threshold else ""
            said = f.symptom if self.disclosure == SYMPTOMS else f.message or f.symptom
            lines.append(f"  {f.status} {f.probe}: {said}{evidence}")
        if self.prefix is not None:
            lines.append(f"  ({prefix_note(self.prefix)})")
        return "\n".join(lines)

    def assert_clean(self, advice: bool = True) -> None:
        """Raise AssertionError (with :meth:`summary`) unless the run was clean; ``advice=False`` fails on advice
        too."""
        advised = [] if advice else [f for f in self.findings if f.status == ADVICE]
        if not self.clean or advised:
            raise AssertionError("\n".join([self.summary(), *(f"  advice {f.probe}: {f.symptom}" for f in advised)]))

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "script": self.script,
            "device": self.device,
            "verdict": self.verdict,
            "exit_code": int(self.exit_code),
            "problem": self.problem,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
            "ran": self.ran,
            "nproc": self.nproc,
            "notes": self.notes,
            "stopped": self.stopped,
            **({"prefix": self.prefix} if self.prefix is not None else {}),
            **({"profile": self.profile} if self.profile is not None else {}),
            "disclosure": self.disclosure,
            "probes": [finding_json(f, self.disclosure) for f in self.findings],
            "before_stop": [finding_json(f, self.disclosure) for f in self.before_stop],
            "output_tail": self.output,
            "output_truncated": self.output_truncated,
            "log": self.log_path,
        }

# A script that ran without ever training through autograd: nothing stopped it, and nothing can be judged.
NO_TRAINING = ("no training was observed: the script never called backward() or updated a parameter after one "
               "(kata check observes training through autograd)")


def symptom_title(probe: str) -> str:
    known = BY_ID.get(probe)
    return known.symptom if known else probe


def finding_json(f: Finding, disclosure: str) -> dict:
    """A finding in the JSON report, one shape at both levels: the check named by what it looks at, with what was
    seen and its evidence; at the diagnosis level also the probe's id, its title and the message that names the
    cause. A part of a check of several criteria (the health gate) is named by its criterion at both levels."""
    known = BY_ID.get(f.probe)
    doc = {"check": known.symptom_id if known else f.probe, "title": known.symptom if known else f.title}
    if disclosure == DIAGNOSIS:
        doc.update(probe=f.probe, probe_title=f.title)
    doc.update(status=f.status, measured=f.measured, threshold=f.threshold, observed=f.symptom)
    if disclosure == DIAGNOSIS:
        doc["message"] = f.message
    doc.update(series=f.series, parts=[finding_json(part, disclosure) for part in f.parts])
    return doc


def unusable(script: str, device: str, problem: str, detail: str, exit_code: int) -> Report:
    """The report on a file that could not be run at all (not found, not Python, empty ...)."""
    verdict = Verdict.USAGE if exit_code == EXIT_USAGE else Verdict.SCRIPT_FAILED
    return Report(script, device, verdict, problem, detail, ran=False)


def judge(run: Run, script: str, device: str, limits: Limits, expect: Expectation | None = None,
          plan: Plan = Plan()) -> Report:
    """The report on ``run``, its verdict decided here once. With ``expect`` (a kata's or a task's planted bugs),
    a clean check passes only when those bugs are gone (see :mod:`checker.expectation`). ``plan``: how it was run
    (a prefix run is judged on what ran until it was stopped)."""
    report = _judge(run, script, device, limits, expect, plan)
    report.ran = report.verdict != Verdict.USAGE  # refused before the script started (--device cuda without CUDA)
    if expect is not None and report.kata is None:  # the run went wrong: what the bugs' probes say is not known
        report.kata = expect.status(report.statuses())
    return report


def _judge(run: Run, script: str, device: str, limits: Limits, expect: Expectation | None, plan: Plan) -> Report:
    report = Report(script, device, Verdict.PASS, output=run.output, seconds=run.seconds, log_path=run.log_path,
                    output_truncated=run.output_truncated, nproc=max(1, len(run.ranks)))
    report.notes = [f"{'rank ' + str(rank) if rank is not None else 'the script'} left a process running "
                    f"({command[:80]}); the checker ended it" for rank, command in run.left_running]
    problem = _run_problem(run, limits)
    if problem:
        return _set(report, *problem)
    ranks = [r for r in run.ranks if run.launched or not untrained_child(r)]
    if ranks:
        return _judge_ranks(report, ranks, run.record, expect)
    outcome = run.record["outcome"]
    failure = _failure(outcome, "the script")
    if failure:
        report.detail = outcome.get("traceback", "")
        ran = RunFacts.from_json(run.record["facts"]) if "facts" in run.record else None
        if ran is not None and outcome["status"] == "exception":
            report.before_stop = before_stop(run.record, ran)
        if ran is not None and plan.prefix:  # what ran of the prefix asked for, before the script stopped
            report.prefix = prefix_covered(plan, outcome, ran)
        return _set(report, *failure)
    facts = RunFacts.from_json(run.record["facts"])
    report.profile = facts.profile
    if not facts.backwards and not facts.updates and run.forked:
        return _set(report, Verdict.SCRIPT_FAILED, "no training was observed in the script's own "
                    "process, and the processes it started from a Process subclass with a run() of its own, in a "
                    "fresh interpreter (the spawn or forkserver method), cannot be observed: give the Process a "
                    "target function instead, or run one process per rank under a launcher (--nproc N)")
    if not facts.backwards and not facts.updates:
        broken = facts.observer_errors.get("session")
        if broken:  # the checker stopped observing: what it did not see, the script may well have done
            return _set(report, Verdict.SCRIPT_FAILED, f"no training was observed because the checker itself failed "
                        f"while observing the script ({broken}): nothing it did after that was seen, so nothing can "
                        "be judged; this is the checker's failure, not necessarily the script's")
        why = (f"the script exited ({exit_name(outcome)}) before any training was observed"
               if outcome.get("exit_called") else
               NO_TRAINING)
        return _set(report, Verdict.SCRIPT_FAILED, why)
    if outcome["status"] == "prefix":
        facts.prefix = outcome["prefix"]["updates"]
    if plan.prefix:
        report.prefix = prefix_covered(plan, outcome, facts)
        report.notes.append(prefix_note(report.prefix))
    early = "" if outcome["status"] == "prefix" else early_end(outcome, facts, run.record)
    if early:
        return _set(report, Verdict.SCRIPT_FAILED, early)
    if facts.stopped and outcome["status"] != "prefix":
        report.stopped = facts.stopped
        report.notes.append(f"training stopped in the middle of a pass ({stopped_where(facts.stopped)}): a break out "
                            "of the training loop; what ran is what was judged")
    report.findings = [_judged(probe, run.record, facts) for probe in PROBES]
    if report.prefix and report.prefix["reached"]:
        for finding in report.findings:
            on_a_prefix(finding, report.prefix)
    return _conclude(report, expect)


def on_a_prefix(finding: Finding, prefix: dict) -> None:
    """A check that did not apply or could not tell on a prefix run says so: its evidence may lie past the stop."""
    if finding.status in (NOT_APPLICABLE, CANNOT_TELL) and finding.probe != "health":  # health says it per criterion
        said = f" (on the run's first {prefix['updates']} updates only: {prefix['asked']})"
        finding.message += said
        if finding.observed:
            finding.observed += said


def prefix_covered(plan: Plan, outcome: dict, facts: RunFacts) -> dict:
    """What a prefix run covered: what was asked, whether the run got that far (else it ended first), the updates
    and the training passes seen."""
    stop = outcome.get("prefix")
    return {"asked": plan.describe(), "reached": stop is not None,
            "updates": stop["updates"] if stop else facts.updates,
            "passes": stop["passes"] if stop else len(facts.training_passes)}


def prefix_note(prefix: dict) -> str:
    passes = prefix["passes"]
    covered = f"{prefix['updates']} updates" + (f" in {passes} training pass{'es' if passes != 1 else ''}"
                                                if passes else "")
    if prefix["reached"]:
        return (f"judged the run's first {covered}: stopped there ({prefix['asked']}); checks whose evidence "
                "comes later (another epoch, the end of a schedule, a resume) could not see it")
    if "--epochs" in prefix["asked"] and not passes:
        return (f"{prefix['asked']} counts passes over a training DataLoader, and this script trained from none: its "
                f"whole run ({covered}) was judged; use --steps to stop it earlier")
    return f"the script ended by itself before {prefix['asked']}: its whole run ({covered}) was judged"


def exit_name(outcome: dict) -> str:
    return f"os._exit({outcome.get('code', 0)})" if outcome.get("os_exit") else "sys.exit"


def stopped_where(stopped: dict) -> str:
    return f"epoch {stopped['epoch']}, after batch {stopped['batches']} of {stopped['of']}"


def seen(facts: RunFacts) -> str:
    epochs = len(facts.training_passes)
    return (f"{facts.backwards} backward passes and {facts.updates} updates" +
            (f" in {epochs} training passes" if epochs else "") + " were seen")


def early_end(outcome: dict, facts: RunFacts, found: dict) -> str:
    """Why a run that trained did not really end, or "": an exit (``sys.exit``, ``os._exit``) from inside a loop of
    the script or in the middle of a training pass, or training that stopped long before the horizon its own
    schedule declares."""
    if outcome.get("exit_called") and outcome.get("code", 0) == 0:
        where = []
        if outcome.get("in_loop"):
            where.append(f"at {outcome['in_loop']}, inside a loop")
        if outcome.get("open_pass"):
            open_pass = outcome["open_pass"]
            of = f" of {open_pass['of']}" if open_pass.get("of") else ""
            where.append(f"in the middle of a training pass (after batch {open_pass['batches']}{of})")
        if where:
            return (f"the script exited ({exit_name(outcome)}) {' and '.join(where)}, while it was still training "
                    f"({seen(facts)}): an exit in the middle of training is not an ending, and what the rest of the "
                    "run would show cannot be judged")
    if facts.stopped:
        from checker.probes import lr_schedule

        declared = lr_schedule.unfinished(lr_schedule.Observation(**found["observations"].get(lr_schedule.ID, {})))
        if declared:
            return (f"training stopped in the middle of a pass ({stopped_where(facts.stopped)}) long before the "
                    f"end its own schedule declares ({declared}): a break out of the training loop is not an "
                    f"ending ({seen(facts)})")
    return ""


def before_stop(record: dict, facts: RunFacts) -> list[Finding]:
    """The symptoms of what a script that raised ran before it stopped, from the probes whose findings stand on a
    run cut short (a divergence, a non-finite value: what happened, not whether it went on to learn)."""
    if not facts.backwards and not facts.updates:
        return []
    return [finding for finding in (_judged(probe, record, facts) for probe in PROBES if probe.id in STANDS_CUT_SHORT)
            if finding.status == FAIL]


def _failure(outcome: dict, who: str) -> tuple[Verdict, str] | None:
    """(verdict, problem) when the script did not run to its end; None when it did."""
    if outcome["status"] == "no-cuda":
        return Verdict.USAGE, ("--device cuda was asked for, but CUDA is not available here: check on a machine "
                               "with CUDA, or without --device cuda")
    if outcome["status"] == "exception":
        error = outcome["error"]
        hint = ""
        if error.startswith(("ModuleNotFoundError", "ImportError")):
            hint = "; is it installed in this environment?"
        elif "env://" in error or "environment variable RANK" in error:
            hint = "; it expects a distributed launcher: check it with --nproc N"
        return Verdict.SCRIPT_FAILED, f"{who} raised {error}{hint}"
    if outcome["status"] == "exit":
        how = f"called os._exit({outcome['code']})" if outcome.get("os_exit") else f"exited with status {outcome['code']}"
        return Verdict.SCRIPT_FAILED, f"{who} {how}"
    return None


def _judged(probe, record: dict, facts: RunFacts) -> Finding:
    return _unobserved(probe, record, facts) or probe.judge(probe.observation(record["observations"][probe.id]), facts)


def _unobserved(probe, record: dict, facts: RunFacts) -> Finding | None:
    """The probe's error when the checker could not observe it in this process; None when it could."""
    errors = facts.observer_errors
    trouble = next(filter(None, (errors.get(who) for who in (probe.id, "session", *probe.uses))), None)
    if trouble or probe.id not in record["observations"]:
        return Finding(probe.id, probe.title, ERROR, message=f"the checker could not observe this: {trouble}")
    return None


SEVERITY = {ERROR: 5, FAIL: 4, ADVICE: 3, CANNOT_TELL: 2, PASS: 1, NOT_APPLICABLE: 0}


def untrained_child(r: RankRun) -> bool:
    """A process the script started itself that ended well without training (a helper, a pool's worker): not a
    rank to judge."""
    if r.record is None or _failure(r.record["outcome"], "") or "facts" not in r.record:
        return False
    facts = RunFacts.from_json(r.record["facts"])
    return not facts.backwards and not facts.updates


def _judge_ranks(report: Report, ranks: list[RankRun], parent: dict | None = None,
                 expect: Expectation | None = None) -> Report:
    """Every rank judged on its own (a finding names the ranks it comes from) and the ranks compared.

    ``parent``: the record of the process that started the ranks itself (``torch.multiprocessing.spawn``)."""
    failure = _rank_failure(ranks)
    if failure:
        report.detail = failure[2]
        return _set(report, *failure[:2])
    if parent is not None and _failure(parent["outcome"], "the script"):
        report.detail = parent["outcome"].get("traceback", "")
        return _set(report, *_failure(parent["outcome"], "the script"))
    facts = [RunFacts.from_json(r.record["facts"]) for r in ranks]
    report.profile = facts[0].profile
    idle = [r.rank for r, f in zip(ranks, facts) if not f.backwards and not f.updates]
    if idle:
        return _set(report, Verdict.SCRIPT_FAILED, f"no training was observed on rank {idle[0]}: it never "
                    "called backward() or updated a parameter")
    grouped = any(f.rank is not None for f in facts)  # ranks of a process group, not independent workers
    parent_facts = RunFacts.from_json(parent["facts"]) if parent is not None and "facts" in parent else None
    for probe in PROBES:
        if probe.judge_ranks is not None:
            broken = next(filter(None, (_unobserved(probe, r.record, f) for r, f in zip(ranks, facts))), None)
            if not grouped:
                report.findings.append(Finding(probe.id, probe.title, NOT_APPLICABLE, message=(
                    f"{len(ranks)} processes trained, but none joined a process group: they are not data-parallel "
                    "replicas to compare (Hogwild-style workers sharing one model)")))
                continue
            report.findings.append(broken or probe.judge_ranks(
                [probe.observation(r.record["observations"][probe.id]) for r in ranks], facts))
        else:
            findings = [_judged(probe, r.record, f) for r, f in zip(ranks, facts)]
            if probe.id == "health" and not grouped:
                findings = [shared_start(f, findings) for f in findings]
            labels = None
            # workers sharing one model trained it; what the main process did itself (evaluate the model after
            # they joined) is judged with them, all but the training gate, which only the workers answer
            if not grouped and parent_facts is not None and probe.id != "health":
                own = _judged(probe, parent, parent_facts)
                if own.status != NOT_APPLICABLE:
                    labels = [*(f"process {i}" for i in range(len(findings))), "the main process"]
                    findings = [*findings, own]
            report.findings.append(merged(findings, "rank" if grouped else "process", labels))
    return _conclude(report, expect)


def shared_start(finding: Finding, every: list[Finding]) -> Finding:
    """Workers that train one shared model (Hogwild): only the first to train saw it untrained, so the initial
    loss is judged on the best of them; the other criteria stay each worker's own."""
    if finding.status == ERROR:
        return finding
    initial = [p for f in every for p in f.parts if p.probe.endswith("initial-loss")]
    if not any(p.status == PASS for p in initial):
        return finding
    parts = [next(p for p in initial if p.status == PASS) if p.probe.endswith("initial-loss") else p
             for p in finding.parts]
    failed = [p for p in parts if p.status == FAIL]
    return Finding(finding.probe, finding.title, FAIL if failed else PASS,
                   f"{sum(p.status == PASS for p in parts)} of {len(parts)} criteria", finding.threshold,
                   "; ".join(p.message for p in failed) if failed else "the script trains and learns", parts=parts)


def merged(findings: list[Finding], unit: str = "rank", labels: list[str] | None = None) -> Finding:
    """One probe's findings on every rank (or worker process), as one: the worst, naming those it was found on
    (``labels``: each finding's process, when not ``unit`` and its number)."""
    worst = max(findings, key=lambda f: SEVERITY.get(f.status, 0))
    if worst.status in (PASS, NOT_APPLICABLE):
        return worst
    labels = labels or [f"{unit} {i}" for i in range(len(findings))]
    where = [rank for rank, f in enumerate(findings) if f.status == worst.status]
    if len(where) == 1:
        label = labels[where[0]]
    elif len(where) == len(findings):
        label = f"every {unit}"
    elif all(labels[i] == f"{unit} {i}" for i in where):
        label = ("processes " if unit == "process" else f"{unit}s ") + ", ".join(map(str, where))
    else:
        label = ", ".join(labels[i] for i in where)
    return Finding(worst.probe, worst.title, worst.status, worst.measured, worst.threshold,
                   f"{label}: {worst.message}", worst.series, worst.parts,
                   f"{label}: {worst.symptom}" if worst.symptom else "")


def _rank_failure(ranks: list[RankRun]) -> tuple[Verdict, str, str] | None:
    """How the ranks failed, first cause first: (verdict, problem, detail); None when all finished.

    The first cause is a rank that ended without a record (killed, os._exit), else the first to end: a rank
    that raised, exited with an error, or left early while the others went on (the others then fail in
    their next collective, or are stopped by the launcher)."""
    def ended_at(r: RankRun) -> float:  # a rank the launcher stopped ended because another failed: it comes last
        return r.record["outcome"].get("ended_at", 0.0) if r.record else (float("inf") if r.stopped else -1.0)

    failed = {r.rank: _failure(r.record["outcome"], f"rank {r.rank}") for r in ranks if r.record}
    missing = [r for r in ranks if r.record is None and not r.stopped]
    broken = [r for r in ranks if r.record is None or failed[r.rank]]
    if not broken:
        return None
    if failed.get(0) and failed[0][0] == "usage":
        return (*failed[0], "")
    first = missing[0] if missing else min(broken, key=ended_at)
    early = [r for r in ranks if r.record and not failed[r.rank] and r.record["outcome"].get("exit_called")
             and ended_at(r) < ended_at(first)]
    lines = []
    if early:
        first = early[0]
        lines.append(f"rank {first.rank} exited (sys.exit) while the other ranks were still training")
    for r in [first] + [r for r in sorted(broken, key=ended_at) if r is not first]:
        if r is first and early:
            continue
        if r.record is None:
            lines.append(f"rank {r.rank} was stopped by the launcher ({r.stopped})" if r.stopped else
                         f"rank {r.rank} ended without the checker's record (os._exit, a signal or a crash?)")
        elif r is first:
            lines.append(failed[r.rank][1])
        else:  # what followed the first failure: its name, not its whole message
            error = r.record["outcome"].get("error", "")
            lines.append(f"rank {r.rank} raised {error.split(':')[0]}" if error else failed[r.rank][1])
    detail = next((r.record["outcome"].get("traceback", "") for r in [first, *broken] if r.record
                   and r.record["outcome"]["status"] == "exception"), "")
    problem = lines[0] + ("; then " + ", ".join(lines[1:]) if lines[1:] else "")
    return Verdict.SCRIPT_FAILED, problem, detail


def _conclude(report: Report, expect: Expectation | None = None) -> Report:
    failed = [f for f in report.findings if f.failed]
    if expect is not None:
        return _against(report, expect, failed)
    if failed:
        return _set(report, Verdict.FAIL, f"{len(failed)} of {len(report.findings)} checks found a symptom")
    advice = [f for f in report.findings if f.status == ADVICE]
    if advice:
        return _set(report, Verdict.PASS, f"no symptom found and the script still trains; {len(advice)} "
                    f"check{'s' if len(advice) > 1 else ''} gave advice")
    return _set(report, Verdict.PASS, "no symptom found and the script still trains")


def _against(report: Report, expect: Expectation, failed: list[Finding]) -> Report:
    """The verdict of a kata or a task's script (see :mod:`checker.expectation`), in this order: a fixed bug whose
    remaining failures were all there before it was planted passes; a break out of training fails; a bug whose
    probes do not all pass fails, saying whether its symptom is still there or could not be confirmed gone."""
    report.kata = status = expect.status(report.statuses())
    _conclude(report)
    if report.verdict == Verdict.FAIL and status == BugStatus.FIXED and set(failing(report)) <= expect.baseline:
        return _set(report, Verdict.PASS, f"{expect.subject} is gone; what the check still finds was already in the "
                    "script before the bug was planted: " + "; ".join(f.symptom for f in failed))
    if report.verdict == Verdict.PASS and report.stopped:
        return _set(report, Verdict.FAIL, "training stopped in the middle of a pass (a break out of the training "
                    "loop): a bug is fixed with all of the training, not by training less")
    if status != BugStatus.FIXED and report.verdict == Verdict.PASS:
        unsure = [f.symptom for f in report.findings if f.probe in expect.probes and f.status != PASS]
        return _set(report, Verdict.FAIL, (f"{expect.subject} is still there: " if status == BugStatus.STILL_PRESENT
                                           else "no symptom was found, but the check could not confirm that "
                                           f"{expect.subject} is gone: ") + "; ".join(unsure))
    return report


def failing(report: Report) -> tuple[str, ...]:
    """What fails in a report, each probe by id and a probe of several criteria (the health gate) by each
    failing criterion ("health: initial loss"), so that one criterion failing before does not excuse another."""
    keys = set()
    for finding in report.findings:
        if finding.failed:
            parts = [part for part in finding.parts if part.failed]
            keys.update([f"{finding.probe}: {part.title}" for part in parts] or [finding.probe])
    return tuple(sorted(keys))


def _run_problem(run: Run, limits: Limits) -> tuple[Verdict, str] | None:
    """How the run itself went wrong, if it did: (verdict, one line)."""
    if run.ended == "interrupted":
        return Verdict.INTERRUPTED, "interrupted: the script and everything it started were stopped"
    failed = [r for r in run.ranks if r.record and _failure(r.record["outcome"], f"rank {r.rank}")]
    if run.ended in ("timeout", "idle") and failed:  # a rank failed and the others waited for it: it comes first
        first = min(failed, key=lambda r: r.record["outcome"].get("ended_at", 0.0))
        waiting = [r for r in run.ranks if r.record is None]
        problem = _failure(first.record["outcome"], f"rank {first.rank}")[1]
        if waiting:
            problem += "; " + where(waiting) + " until stopped"
        return Verdict.SCRIPT_FAILED, problem
    if run.ended == "timeout":
        return Verdict.TIMEOUT, f"the script did not finish within {limits.timeout:g} s (--timeout)" + \
            _unfinished(run)
    if run.ended == "idle":
        if run.forked:
            return Verdict.TIMEOUT, (f"no progress for {limits.idle:g} s (--idle): the script's own process "
                                             "waited for processes it started from a Process subclass with a run() "
                                             "of its own in a fresh interpreter, which cannot be observed (give the "
                                             "Process a target function, or use --nproc N)")
        if run.ranks:
            return Verdict.TIMEOUT, f"no progress for {limits.idle:g} s (--idle){_unfinished(run)}"
        return Verdict.TIMEOUT, f"no progress for {limits.idle:g} s: is a loop unbounded? (--idle)"
    if run.ended == "memory":
        return Verdict.SCRIPT_FAILED, (
            f"the script used more than {limits.memory_mb:.0f} MB of memory and was stopped (--memory)")
    if run.forged:
        return Verdict.SCRIPT_FAILED, (
            "the result record was not written by the checker (its signature does not match): not trusted")
    if run.launched:  # the launcher's ranks: each has its own record
        return None
    if run.record is None:
        if run.returncode is not None and run.returncode < 0:
            name = signal.Signals(-run.returncode).name
            oom = " (possibly out of memory)" if name == "SIGKILL" else ""
            return Verdict.SCRIPT_FAILED, f"the script was killed by {name}{oom} before it finished"
        return Verdict.SCRIPT_FAILED, (
            f"the script ended (status {run.returncode}) before it finished, without the checker's record "
            "(os._exit or a crash?)")
    return None


def _unfinished(run: Run) -> str:
    """Where each rank of a distributed run was when it was stopped (empty for one process)."""
    return ": " + where(run.ranks) if run.ranks else ""


def where(ranks: list[RankRun]) -> str:
    """Each rank's state at the end: finished, waiting in a collective, or working."""
    return "; ".join(f"rank {r.rank} " + ("had finished" if r.record else f"was waiting in {r.collective}"
                                          if r.collective else "was still running (not in a collective called "
                                          "from Python)") for r in ranks)


def _set(report: Report, verdict: Verdict, problem: str) -> Report:
    report.verdict, report.problem = verdict, problem
    return report
