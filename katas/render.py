"""Rendering a check report for people, laid out for the terminal it gets.

Wide terminals (``WIDE`` columns and more) get a table; narrower ones get each
check stacked as a status line with its words wrapped underneath. Plots carry
their scale. At the ``symptoms`` level checks are named by what was seen, never
by their cause (see :mod:`checker.verdict`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from checker.findings import ADVICE, CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.verdict import SYMPTOMS, Report, symptom_title
from katas.plots import Plot, evidence

STYLES = {PASS: ("PASS", "green"), FAIL: ("FAIL", "bold red"), NOT_APPLICABLE: ("n/a", "dim"), ERROR: ("ERROR", "magenta"),
          CANNOT_TELL: ("cannot tell", "yellow"), ADVICE: ("ADVICE", "bold yellow")}
WIDE = 110  # below this many columns, checks are stacked instead of tabled
TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


class TidyConsole(Console):
    """Rich's console without the spaces it pads lines with (they trail in pipes and logs)."""

    def print(self, *objects, **kwargs) -> None:
        with self.capture() as captured:
            super().print(*objects, **kwargs)
        self.file.write(TRAILING.sub(r"\1", captured.get()))
        self.file.flush()


def make_console() -> Console:
    """Colour and styles only on a terminal and without NO_COLOR; 120 columns when not a terminal (unless COLUMNS)."""
    plain = bool(os.environ.get("NO_COLOR"))
    console = TidyConsole(color_system=None if plain else "auto")
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = TidyConsole(color_system=None if plain else "auto", width=120)
    return console


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
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=4)
    grid.add_column()
    for f in findings:
        _stack(grid, f, level, verbose, "")
        for part in f.parts if verbose or f.status != PASS else ():
            _stack(grid, part, level, verbose, "  ")
    return grid


def _stack(grid: Table, f: Finding, level: str, verbose: bool, indent: str) -> None:
    figure = f.measured + (f" (expected {f.threshold})" if f.threshold and f.measured else "")
    line = Text(indent + name_of(f, level), style="bold" if f.flagged else "")
    if figure:
        line.append(f": {figure}")
    words = said(f, level, verbose)
    if words:
        line.append("\n" + indent + words, style="" if f.flagged else "dim")
    grid.add_row(status_text(f.status), line)


def evidence_block(findings: list[Finding], level: str, width: int) -> Group | None:
    """Each plotted series: a title line, then the plot between its lowest and highest values, then the note."""
    rows: list = []
    for f in findings:
        for plot in evidence(f.probe, f.series):
            title = plot.label if level == SYMPTOMS else f"{f.probe}: {plot.label}"
            rows += plot_lines(title, plot, width)
    return Group(Text("evidence", style="bold"), *rows) if rows else None


def plot_lines(title: str, plot: Plot, width: int) -> list[Text]:
    low, high = plot.scale
    room = max(8, min(60, width - len(low) - len(high) - 4))
    line = Text("  ")
    line.append(low, style="dim")
    line.append(" " + plot.draw(room) + " ")
    line.append(high, style="dim")
    lines = [Text(title), line]
    if plot.note:
        lines.append(Text(f"  {plot.note}", style="dim"))
    return lines


NEXT_STEP = {
    "fail": "Edit the script, then run {command} again.",
    "script-failed": "Fix what stopped the script (above), then run {command} again.",
    "timeout": "Make the script finish sooner (or raise --timeout / --idle), then run {command} again.",
    "interrupted": "Stopped before the end; nothing was judged. Run {command} to check again.",
    "usage": "Nothing ran: run {command} on a machine with CUDA, or without --device cuda.",
}
INJECTED = {"fixed": "green", "still present": "bold red", "cannot tell": "yellow", "not checked": "yellow"}


def show(report: Report, console: Console, command: str, injected: str | None = None, verbose: bool = False) -> None:
    level = report.disclosure
    ranks = f", {report.nproc} ranks" if report.nproc > 1 else ""
    console.print(f"[bold]kata check[/] {escape(report.script)}  [dim]({report.device}{ranks}, {report.seconds:.1f} s)[/]")
    if injected:
        console.print(f"injected bug: [{INJECTED[injected]}]{injected}[/]")
    if report.findings:
        wide = console.width >= WIDE
        console.print(findings_table(report.findings, level, verbose) if wide else stacked(report.findings, level, verbose))
        plots = evidence_block([f for f in report.findings if verbose or f.flagged], level, console.width)
        if plots is not None:
            console.print(plots)
    if report.detail:
        console.print(Text(report.detail, style="red"))
    if report.verdict in ("script-failed", "timeout", "interrupted") and report.output.strip():
        console.print("[dim]last lines the script printed:[/]")
        console.print(Text("\n".join(report.output.rstrip().splitlines()[-15:]), style="dim"))
    for note in report.notes:
        console.print(f"[yellow]{escape(note)}[/]")
    if report.output_truncated:
        console.print(f"[dim]output truncated, full log at {escape(report.log_path)}[/]")
    if level == SYMPTOMS and report.findings:
        cost = "it counts as a hint" if injected else "your interviewer will see that you used it"
        console.print(f"[dim]Symptoms only: `--diagnose` also names the causes ({cost}).[/]")
    if report.verdict == "pass":
        console.print(f"[green]✓ {report.problem}[/]")
        if injected:
            kata = Path(report.script).stem
            console.print(f"Kata solved. Compare with the correct script: [bold]kata solution {kata}[/]; "
                          "see what is left: [bold]kata[/]")
    else:
        console.print(f"[red]✗ {escape(report.problem)}[/]")
        console.print(NEXT_STEP.get(report.verdict, NEXT_STEP["fail"]).format(command=f"[bold]{escape(command)}[/]"))
