"""How output must be laid out. A check report at any width, asserted on a report already checked (rendered
through the real renderer at each width: tests/test_report.py, and every reference in tests/test_references.py);
and the real command in a pseudo-terminal of a given size, for what only a terminal shows."""
from __future__ import annotations

import copy
import fcntl
import io
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections import Counter
from pathlib import Path

from rich.cells import cell_len

from checker.findings import ADVICE, CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS
from checker.verdict import SYMPTOMS, Report, symptom_title
from katas.render import TidyConsole, show

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTHS = (60, 80, 120)
SCREEN = 40  # a terminal's rows: where the finding and the verdict must be
# What the summary line says of each status ("36 checks: 1 found a symptom · 21 saw nothing wrong · ...").
SAID = {"found a symptom": FAIL, "could not observe": ERROR, "gave advice": ADVICE, "could not tell": CANNOT_TELL,
        "saw nothing wrong": PASS, "did not apply": NOT_APPLICABLE}
LABELS = {"FAIL": FAIL, "ERROR": ERROR, "ADVICE": ADVICE, "cannot tell": CANNOT_TELL, "PASS": PASS, "n/a": NOT_APPLICABLE}
STATUS_LINE = re.compile(r"^(FAIL|ERROR|ADVICE|cannot tell|PASS|n/a) +\S")


def rendered(report: Report, width: int, injected: str | None = None, verbose: bool = False) -> str:
    report = copy.deepcopy(report)
    report.script = "train.py"
    out = io.StringIO()
    show(report, TidyConsole(file=out, width=width, color_system=None), "kata check train.py", injected, verbose)
    return out.getvalue()


def flowing(lines: list[str]) -> str:
    """The lines as one text, however they were wrapped."""
    return " ".join(" ".join(lines).split())


def name(finding, level: str) -> str:
    return finding.title if "." in finding.probe else symptom_title(finding.probe) if level == SYMPTOMS else finding.probe


def said(finding, level: str) -> str:
    return finding.symptom if level == SYMPTOMS else finding.message


def assert_fits(text: str, width: int) -> list[str]:
    lines = text.splitlines()
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, f"wider than {width}: {too_wide}"
    assert not [line for line in lines if line != line.rstrip()]  # nothing trails
    assert "…" not in text  # nothing is cut short
    return lines


def assert_laid_out(report: Report, injected: str | None = None, listing: bool = True) -> None:
    """At every width: every line fits; the symptoms and the verdict come within a screen; a clean run takes a few
    lines; the summary counts every check as the findings say. With ``listing``, -v lists every check, stacked
    or as a table (a slower rendering: for a few reports)."""
    level = report.disclosure
    statuses = Counter(f.status for f in report.findings)
    failed = [f for f in report.findings if f.failed]
    for width in WIDTHS:
        text = rendered(report, width, injected)
        lines = assert_fits(text, width)
        verdict = next(i for i, line in enumerate(lines) if line.startswith(("✓ ", "✗ ")))
        assert verdict < SCREEN and lines[verdict].startswith("✓" if report.verdict == "pass" else "✗"), text
        verdict_words = flowing(lines[verdict:])
        if injected:
            assert verdict_words.startswith(f"✗ injected bug: {injected}" if report.verdict != "pass"
                                            else f"✓ injected bug: {injected}"), text
        if width >= 80 and report.verdict.ran:
            assert len(lines) <= SCREEN, text  # 80x40: all of it on one screen
        if report.verdict == "pass" and set(statuses) <= {PASS, NOT_APPLICABLE}:
            assert len(lines) <= 5, text  # a clean run: the header, the counts, the verdict (and a kata's next step)

        screen = flowing(lines[:SCREEN])
        for f in failed:  # each symptom with its words, within the screen, and named by the verdict
            label = "FAIL" if f.status == FAIL else "ERROR"
            assert re.search(rf"{label} +{re.escape(name(f, level))}", screen), (name(f, level), text)
            words = [p for p in f.parts if p.failed] or [f]
            assert all(" ".join(said(p, level).split()) in screen for p in words), text
            assert name(f, level) in verdict_words, text
        if not failed and report.verdict == "fail":  # a kata whose bug shows only as advice (a cost)
            for f in report.findings:
                if f.status == ADVICE:
                    assert " ".join(said(f, level).split()) in screen and name(f, level) in verdict_words, text

        shown = Counter(LABELS[STATUS_LINE.match(line).group(1)] for line in lines if STATUS_LINE.match(line))
        parts = Counter(p.status for f in failed for p in f.parts if p.status not in (PASS, NOT_APPLICABLE))
        expected = Counter({s: n for s, n in statuses.items() if s in (FAIL, ERROR, ADVICE, CANNOT_TELL)}) + parts
        assert shown == expected, text  # the checks that passed or did not apply are only counted

        if report.findings:
            assert summary_of(lines) == (len(report.findings), dict(statuses)), text

    for width in (60, 120) if listing else ():
        everything = rendered(report, width, injected, verbose=True)
        lines = assert_fits(everything, width)
        assert ("what was observed" in everything) == (width >= 110 and bool(report.findings))  # a table when wide
        if width < 110:  # stacked: one status line for each check
            every = flowing(lines)
            assert all(re.search(rf"{label_of(f.status)} +{re.escape(name(f, level))}", every)
                       for f in report.findings), everything
        if report.findings:
            assert summary_of(lines)[0] == len(report.findings) and "-v lists them" not in everything


def label_of(status) -> str:
    return next(label for label, each in LABELS.items() if each == status)


def summary_of(lines: list[str]) -> tuple[int, dict]:
    """The count of checks the summary line gives, and its count of each status."""
    start = next(i for i, line in enumerate(lines) if re.match(r"\d+ checks: ", line))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    total, said = " · ".join(line.strip() for line in lines[start:end]).split(" checks: ")  # breaks between counts
    counts = [part.split(" ", 1) for part in said.split(" · ") if part != "-v lists them"]
    return int(total), {SAID[words]: int(n) for n, words in counts}


def in_terminal(args: list[str], columns: int, rows: int = SCREEN, env: dict | None = None,
                timeout: float = 120) -> tuple[int, str]:
    """`kata ARGS` in a pseudo-terminal of ``columns`` by ``rows`` (its size as a terminal reports it; no COLUMNS
    or LINES in the environment): the exit code, and all it wrote, as the terminal got it."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "NO_COLOR",
                                                                                 "FORCE_COLOR")}
    process = subprocess.Popen([sys.executable, "-m", "katas", *args], cwd=ROOT, stdin=follower, stdout=follower,
                               stderr=follower, env={**environment, "TERM": "xterm-256color", **(env or {})})
    os.close(follower)
    written = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([leader], [], [], 1)[0]:
                try:
                    chunk = os.read(leader, 1 << 16)
                except OSError:  # the terminal's other end closed: the command ended
                    break
                if not chunk:
                    break
                written += chunk
        return process.wait(timeout=30), written.decode().replace("\r\n", "\n")
    finally:
        process.kill()
        os.close(leader)


def copied_kata(number: str, folder: Path) -> Path:
    """The ready-made kata broken/NUMBER.py, with its metadata, copied into ``folder`` (where a command may
    record progress): cheaper than making one."""
    (folder / ".kata").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "broken" / ".kata" / f"{number}.json", folder / ".kata" / f"{number}.json")
    return Path(shutil.copyfile(ROOT / "broken" / f"{number}.py", folder / f"{number}.py"))
