"""What the brief tells the candidate: what one run of the task's script showed, in words no catalogue page holds.

The brief is written from the task's own run under the checker, at the level of symptoms: what each flagged
check observed (never the cause it points to) and the end of the script's printed output. A line that shares a
run of :data:`RUN` words with the catalogue (``kata explain``, ``kata bugs``, the docs) would let a search lead
from the brief to a bug's page: it is said with the check's figures instead, or left out.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

RUN = 6  # words in a row that a search could find
OUTPUT_LINES = 8  # lines of the run's printed output the brief quotes, from its end
LINE_WIDTH = 100


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def runs(text: str, length: int = RUN) -> set[tuple[str, ...]]:
    """Every run of ``length`` words in ``text``, case and punctuation ignored."""
    found = words(text)
    return {tuple(found[i:i + length]) for i in range(len(found) - length + 1)}


@dataclass(frozen=True)
class Catalogue:
    """Every run of words of the catalogue's texts, to keep the brief's lines from them."""

    known: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, texts: Iterable[str]) -> "Catalogue":
        return cls(frozenset().union(*(runs(text) for text in texts)))

    def holds(self, line: str) -> bool:
        return not runs(line).isdisjoint(self.known)


@dataclass
class Observed:
    """What the brief says the run showed: one line per flagged check, and the end of the printed output."""

    symptoms: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)


def describe(report, catalogue: Catalogue, script: str) -> Observed:
    """The symptoms ``report`` (a checker.verdict.Report of the task's script, named ``script``) shows, none
    searchable in ``catalogue``; the folder it ran from is left out of the output quoted."""
    from checker.probes import SHOWING_ADVICE

    flagged = [f for f in report.findings if f.failed or (f.status == "advice" and f.probe in SHOWING_ADVICE)]
    observed = Observed()
    for finding in flagged:
        line = next((text for text in said(finding) if not catalogue.holds(text)), None)
        if line:
            observed.symptoms.append(line)
    folder = re.compile(rf"[^\s\"']*/(?={re.escape(script)})")
    tail = [folder.sub("", line).rstrip()[:LINE_WIDTH] for line in report.output.splitlines() if line.strip()]
    observed.output = [line for line in tail[-OUTPUT_LINES:] if not catalogue.holds(line)]
    return observed


def said(finding) -> list[str]:
    """Ways to say what ``finding`` observed, richest first: its symptom in words, then its figures alone."""
    ways = [sentence(finding.symptom)] if finding.symptom else []
    if finding.measured:
        expected = f", expected {finding.threshold}" if finding.threshold else ""
        ways.append(sentence(f"{symptom_name(finding.probe)}: measured {finding.measured}{expected}"))
    return ways


def symptom_name(probe: str) -> str:
    """A probe's symptom in two or three words (``pad sensitivity``), as `kata check --json` names it."""
    from checker.probes import BY_ID

    known = BY_ID.get(probe)
    return (known.symptom_id if known else probe).replace("-", " ")


def sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")
