"""Rendering a check report for people, laid out for the terminal it gets.

A report leads with what was found: each symptom with its words and the plots of its evidence, then one short
line for each piece of advice and each check that could not tell, then one line that counts every check, then
the verdict (naming the symptoms) and the command to run next. A clean run is a few lines. ``-v`` lists every
check: as a table on wide terminals (``WIDE`` columns and more), stacked on narrower ones. Every line fits the
console's width: the terminal's, or 80 columns in a pipe unless COLUMNS says otherwise. At the ``symptoms`` level
checks are named by what was seen, never by their cause (see :mod:`checker.verdict`).
"""
from __future__ import annotations

import os
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from checker.exits import Verdict
from checker.findings import ADVICE, CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS, Finding, Status
from checker.verdict import NO_TRAINING, SYMPTOMS, Report, symptom_title
from katas.plots import Plot, evidence, sparkline
from katas.terminal import columns

STYLES = {PASS: ("PASS", "green"), FAIL: ("FAIL", "bold red"), NOT_APPLICABLE: ("n/a", "dim"), ERROR: ("ERROR", "magenta"),
          CANNOT_TELL: ("cannot tell", "yellow"), ADVICE: ("ADVICE", "bold yellow")}
# How the summary line counts the checks of each status, in its order.
COUNTED = {FAIL: "found a symptom", ERROR: "could not observe", ADVICE: "gave advice", CANNOT_TELL: "could not tell",
           PASS: "saw nothing wrong", NOT_APPLICABLE: "did not apply"}
SCREEN = 40  # a report's symptoms, counts and verdict fit a terminal of this many rows (80x40)
WIDE = 110  # below this many columns, -v stacks the checks instead of tabling them
TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


class TidyConsole(Console):
    """Rich's console without the spaces it pads lines with (they trail in pipes and logs)."""

    def print(self, *objects, **kwargs) -> None:
        with self.capture() as captured:
            super().print(*objects, **kwargs)
        self.file.write(TRAILING.sub(r"\1", captured.get()))
        self.file.flush()


def make_console() -> Console:
    """Colour and styles only on a terminal and without NO_COLOR. A terminal's width follows the terminal (rich
    reads it at every print); a pipe or a file gets 80 columns, or COLUMNS (see :func:`katas.terminal.columns`)."""
    plain = bool(os.environ.get("NO_COLOR"))
    return TidyConsole(color_system=None if plain else "auto", width=None if sys.stdout.isatty() else columns())


def status_text(status: str) -> Text:
    label, style = STYLES[status]
    return Text(label, style=style)


def name_of(finding: Finding, level: str) -> str:
    """A check's name: its id, or at the symptoms level what it looks at."""
    if "." in finding.probe:  # a part of the health gate, named by its criterion at every level
        return finding.title
    return symptom_title(finding.probe) if level == SYMPTOMS else finding.probe


def words_of(finding: Finding, level: str) -> str:
    return finding.symptom if level == SYMPTOMS else finding.message


def findings_table(findings: list[Finding], level: str, verbose: bool) -> Table:
    table = Table(show_edge=False, header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    table.add_column("check", max_width=32)
    table.add_column("status", no_wrap=True)
    table.add_column("measured", max_width=20)
    table.add_column("expected", max_width=14)
    table.add_column("what was observed", ratio=1, min_width=24, overflow="fold")
    for f in findings:
        table.add_row(name_of(f, level), status_text(f.status), f.measured, f.threshold, said(f, level, verbose))
        for part in f.parts if verbose or f.status != PASS else ():
            table.add_row(f"  {part.title}", status_text(part.status), part.measured, part.threshold,
                          said(part, level, verbose))
    return table


def said(f: Finding, level: str, verbose: bool) -> str:
    """What a check has to say: always when it did not pass, with -v when it did."""
    return words_of(f, level) if verbose or f.status != PASS else ""


def stacked(findings: list[Finding], level: str, verbose: bool) -> Table:
    """One check per line (status, name, measured against expected), its words wrapped under it when it matters."""
    grid = status_grid(statuses(findings))
    for f in findings:
        _stack(grid, f, level, verbose, "")
        for part in f.parts if verbose or f.status != PASS else ():
            _stack(grid, part, level, verbose, "  ")
    return grid


def statuses(findings: list[Finding]) -> list[Status]:
    """The status of each finding and of each of its parts."""
    return [each.status for f in findings for each in (f, *f.parts)]


def status_grid(shown: list[Status]) -> Table:
    """Two columns: the status, as wide as the widest label of those ``shown``, and what goes with it."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, width=label_width(shown))
    grid.add_column()
    return grid


def label_width(shown: list[Status]) -> int:
    return max((len(STYLES[status][0]) for status in shown), default=0)


def headline(f: Finding, level: str) -> Text:
    """A check's name, with what it measured against what was expected."""
    figure = f.measured + (f" (expected {f.threshold})" if f.threshold and f.measured else "")
    line = Text(name_of(f, level), style="bold" if f.flagged else "")
    if figure:
        line.append(f": {figure}")
    return line


def _stack(grid: Table, f: Finding, level: str, verbose: bool, indent: str, words: bool = True) -> None:
    """A status line (a part of a check indented under its check), its words under it unless not ``words``."""
    line = headline(f, level)
    told = said(f, level, verbose) if words else ""
    if told:
        line.append("\n" + told, style="" if f.flagged else "dim")
    grid.add_row(status_text(f.status), Padding(line, (0, 0, 0, len(indent))))


def evidence_block(findings: list[Finding], level: str, width: int) -> Group | None:
    """Each plotted series: a title line, then the plot between its lowest and highest values, then the note."""
    rows: list = []
    for f in findings:
        for plot in evidence(f.probe, f.series):
            title = plot.label if level == SYMPTOMS else f"{f.probe}: {plot.label}"
            rows += plot_lines(title, plot, width)
    return Group(Text("evidence", style="bold"), *rows) if rows else None


def plot_lines(title: str, plot: Plot, width: int) -> list[Text]:
    """The title, then the plot indented two columns between its lowest and highest values, all in ``width``."""
    low, high = plot.scale
    room = max(1, min(60, width - len(low) - len(high) - 4))
    line = Text("  ")
    line.append(low, style="dim")
    line.append(" " + plot.draw(room) + " ")
    line.append(high, style="dim")
    lines = [Text(title), line]
    if plot.note:
        lines.append(Text(f"  {plot.note}", style="dim"))
    return lines


def grounds(report: Report) -> list[Finding]:
    """What the verdict rests on, shown in full: the checks that failed; in a kata whose bug shows as advice (a
    performance cost), that advice."""
    failed = [f for f in report.findings if f.failed]
    if failed or report.verdict != Verdict.FAIL:
        return failed
    return [f for f in report.findings if f.status == ADVICE]


def found(report: Report, width: int, plotted: int | None = None) -> list:
    """The symptoms in full (words, unpassed criteria, the plots of the first ``plotted`` of them, each series
    once), then one line for each other piece of advice, and each check that could not tell with why."""
    level, full = report.disclosure, grounds(report)
    plotted = len(full) if plotted is None else plotted
    blocks: list = []
    if full:
        grid = status_grid(statuses(full))
        room = width - label_width(statuses(full)) - 1  # the second column's width
        drawn: list[list] = []
        for i, f in enumerate(full):
            unpassed = [part for part in f.parts if part.status not in (PASS, NOT_APPLICABLE)]
            _stack(grid, f, level, False, "", words=not unpassed)  # a check of several criteria: theirs say it
            for part in unpassed:
                _stack(grid, part, level, False, "  ")
            plots = [plot for plot in evidence(f.probe, f.series) if i < plotted and plot.values not in drawn]
            drawn += [plot.values for plot in plots]
            if plots:
                grid.add_row("", Group(*[line for plot in plots for line in plot_lines(f"{plot.label}:", plot, room)]))
        blocks.append(grid)
        if plotted < len(full):
            left = len(full) - plotted
            which = "the last symptom" if left == 1 else f"the last {left} symptoms"
            blocks.append(Text(f"(-v plots the evidence of {which} too)", style="dim"))
    brief = [f for f in report.findings if f.status in (ADVICE, CANNOT_TELL) and f not in full]
    if brief:
        grid = status_grid([f.status for f in brief])
        for f in brief:  # advice in one line (-v says more); a check that could not tell says why
            _stack(grid, f, level, False, "", words=f.status == CANNOT_TELL)
        blocks.append(grid)
    return blocks


def fitted(report: Report, console: Console, rest: int) -> list:
    """:func:`found`, leaving out the plots of the last symptoms until it and ``rest`` more lines fit a screen."""
    plotted = len(grounds(report))
    while True:
        blocks = found(report, console.width, plotted)
        if plotted == 0 or height(blocks, console) + rest <= SCREEN:
            return blocks
        plotted -= 1


def height(renderables: list, console: Console) -> int:
    """The lines ``renderables`` take at the console's width."""
    return sum(len(console.render_lines(r, console.options, pad=False)) for r in renderables)


def summary(findings: list[Finding], verbose: bool, width: int) -> Text:
    """Every check counted by what it concluded ("36 checks: 1 found a symptom · 21 saw nothing wrong · ..."),
    in lines of ``width`` that break only between counts."""
    counts = Counter(f.status for f in findings)
    said = [f"{counts[status]} {words}" for status, words in COUNTED.items() if counts[status]]
    said[0] = f"{len(findings)} checks: {said[0]}"
    lines = [""]
    for words in said + ([] if verbose else ["-v lists them"]):
        if not lines[-1]:
            lines[-1] = words
        elif len(lines[-1]) + len(f" · {words}") <= width:
            lines[-1] += f" · {words}"
        else:
            lines.append(f"  {words}")
    return Text("\n".join(lines), style="dim")


NEXT_STEP = {
    Verdict.FAIL: "Edit the script, then {rerun}.",
    Verdict.SCRIPT_FAILED: "Fix what stopped the script (above), then {rerun}.",
    Verdict.TIMEOUT: "Make the script finish sooner (or raise --timeout / --idle), then {rerun}.",
    Verdict.INTERRUPTED: "Stopped before the end; nothing was judged: {rerun}.",
    Verdict.USAGE: "Nothing ran: run {command} on a machine with CUDA, or without --device cuda.",
}
NOTHING_TRAINED = ("Nothing stopped the script and nothing was judged: point {command} at a script that trains with "
                   "autograd (gradients computed by hand are not observed).")
INJECTED = {"fixed": "green", "still present": "bold red", "cannot tell": "yellow", "not checked": "yellow"}


def verdict_line(report: Report, injected: str | None) -> Table:
    """✓ or ✗, then a kata's bug status and the symptoms by name (else the verdict's own words), wrapped under
    them."""
    passed = report.verdict == Verdict.PASS
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(Text("✓" if passed else "✗", style="green" if passed else "red"), verdict_words(report, injected))
    return grid


def verdict_words(report: Report, injected: str | None) -> Text:
    passed = report.verdict == Verdict.PASS
    line = Text()
    if injected:
        line.append("injected bug: ")
        line.append(injected, style=INJECTED[injected])
        line.append(" · ")
    named = grounds(report) if report.verdict == Verdict.FAIL else []
    if not named:
        line.append(report.problem, style="green" if passed else "red")
        return line
    observed = [f for f in named if f.status != ERROR]
    unobserved = [f for f in named if f.status == ERROR]
    said = ([f"{'symptom' if len(observed) == 1 else f'{len(observed)} symptoms'}: " + names(observed, report)]
            if observed else []) + ([f"could not observe: {names(unobserved, report)}"] if unobserved else [])
    line.append(" · ".join(said), style="red")
    return line


def names(findings: list[Finding], report: Report) -> str:
    return "; ".join(name_of(f, report.disclosure) for f in findings)


def show(report: Report, console: Console, command: str, injected: str | None = None, verbose: bool = False,
         rerun: str | None = None) -> None:
    """The report, for people. ``command``: how to check again; ``rerun``: what the closing line tells to do once
    the script is edited (default: run ``command`` again; `kata watch` says that saving re-checks)."""
    level = report.disclosure
    ranks = f", {report.nproc} ranks" if report.nproc > 1 else ""
    console.print(f"[bold]kata check[/] {escape(report.script)}  [dim]({report.device}{ranks}, {report.seconds:.1f} s)[/]")
    tail = closing(report, console.width, command, injected, verbose, rerun)
    if report.findings and verbose:
        wide = console.width >= WIDE
        console.print(findings_table(report.findings, level, verbose) if wide else stacked(report.findings, level, verbose))
        plots = evidence_block(report.findings, level, console.width)
        if plots is not None:
            console.print(plots)
    elif report.findings:
        for block in fitted(report, console, 1 + height(tail, console)):  # 1: the header
            console.print(block)
    for part in tail:
        console.print(part)


PHASE_NAMES = {"data": "waiting for data", "forward": "forward", "backward": "backward", "optimizer": "optimizer step",
               "evaluation": "evaluation", "checker": "kata check's own", "other": "other (the script's own code)"}
BAR = 24  # characters of the longest bar


def profile_table(profile: dict) -> Table | Group:
    """``--profile``: where the time of the training steps went, phase by phase, per step and as a share, and each
    step's time in order (an epoch's evaluation, workers restarting, a slow batch show as peaks)."""
    updates, span = profile["updates"], profile["span_s"]
    table = Table(title=f"Where the time went: {updates} training steps in {span:.2f} s "
                        f"({1000 * span / updates:.1f} ms a step)", title_justify="left", box=None, pad_edge=False)
    table.add_column("phase")
    table.add_column("per step", justify="right")
    table.add_column("share", justify="right")
    table.add_column("")
    largest = max(profile["phases"].values(), default=0.0) or 1.0
    for phase, seconds in profile["phases"].items():
        if seconds <= 0 and phase not in ("data", "forward", "backward", "optimizer"):
            continue
        share = seconds / span if span else 0.0
        table.add_row(PHASE_NAMES.get(phase, phase), f"{1000 * seconds / updates:.2f} ms", f"{share:.0%}",
                      "█" * max(0, round(BAR * seconds / largest)))
    steps = profile.get("steps_s") or []
    if len(steps) < 2:
        return table
    line = Text(f"each step, in order: {sparkline(steps, 36)}  {1000 * min(steps):.3g} to "
                f"{1000 * max(steps):.3g} ms")
    return Group(table, line)


def closing(report: Report, width: int, command: str, injected: str | None, verbose: bool,
            rerun: str | None) -> list:
    """What follows the findings: the counts, why the script did not run to its end, notes, the verdict and the
    next step."""
    tail: list = [summary(report.findings, verbose, width)] if report.findings else []
    if report.profile and report.profile["updates"]:
        tail.append(profile_table(report.profile))
    if report.detail:
        tail.append(Text(report.detail, style="red"))
    if report.before_stop:
        tail.append("[bold]Before it stopped, the run showed:[/]")
        tail += found(replace(report, findings=report.before_stop), width, len(report.before_stop) if verbose else 0)
    if report.verdict in (Verdict.SCRIPT_FAILED, Verdict.TIMEOUT, Verdict.INTERRUPTED) and report.output.strip():
        tail.append("[dim]last lines the script printed:[/]")
        tail.append(Text("\n".join(report.output.rstrip().splitlines()[-15:]), style="dim"))
    tail += [f"[yellow]{escape(note)}[/]" for note in report.notes]
    if report.output_truncated:
        tail.append(f"[dim]output truncated, full log at {escape(report.log_path)}[/]")
    if report.disclosure == SYMPTOMS and any(f.status not in (PASS, NOT_APPLICABLE) for f in report.findings):
        cost = "it counts as a hint" if injected else "your interviewer will see that you used it"
        tail.append(f"[dim]Symptoms only: `--diagnose` also names the causes ({cost}).[/]")
    tail.append(verdict_line(report, injected))
    if report.verdict == Verdict.PASS:
        if injected:
            kata = Path(report.script).stem
            tail.append(f"Kata solved. Compare with the correct script: [bold]kata solution {kata}[/]; "
                        "see what is left: [bold]kata[/]")
        return tail
    shown = f"[bold]{escape(command)}[/]"
    step = NOTHING_TRAINED if report.problem == NO_TRAINING else NEXT_STEP[report.verdict]
    tail.append(step.format(command=shown, rerun=rerun or f"run {shown} again"))
    return tail
