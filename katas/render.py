"""Rendering a check report for people: a rich table that degrades to plain text."""
from __future__ import annotations

import os
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from checker.findings import CANNOT_TELL, ERROR, FAIL, NOT_APPLICABLE, PASS, Finding
from checker.verdict import Report
from katas.plots import evidence

STYLES = {PASS: ("PASS", "green"), FAIL: ("FAIL", "bold red"), NOT_APPLICABLE: ("n/a", "dim"), ERROR: ("ERROR", "magenta"),
          CANNOT_TELL: ("cannot tell", "yellow")}


def make_console() -> Console:
    """Rich's console (it honours NO_COLOR and drops colour when piped), wider when not a terminal."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=120)
    return console


def status_text(status: str) -> Text:
    label, style = STYLES[status]
    return Text(label, style=style)


def findings_table(findings: list[Finding]) -> Table:
    table = Table(show_edge=False, header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    for column in ("check", "status", "measured", "threshold"):
        table.add_column(column, no_wrap=True)
    table.add_column("what was observed", ratio=1, min_width=30)
    for f in findings:
        table.add_row(f.probe, status_text(f.status), f.measured, f.threshold, f.message)
        for part in f.parts:
            table.add_row(f"  {part.title}", status_text(part.status), part.measured, part.threshold, part.message)
    return table


INJECTED = {"fixed": "green", "still present": "bold red", "cannot tell": "yellow"}


def evidence_table(findings: list[Finding]) -> Table | None:
    rows = [(f.probe, *row) for f in findings for row in evidence(f.probe, f.series)]
    if not rows:
        return None
    table = Table(show_edge=False, header_style="bold", pad_edge=False, box=None, title_justify="left",
                  title="evidence", title_style="bold")
    for column in ("check", "series", "plot", ""):
        table.add_column(column, no_wrap=column != "")
    for probe, label, plot, note in rows:
        table.add_row(probe, label, plot, note)
    return table


def show(report: Report, console: Console, command: str, injected: str | None = None, verbose: bool = False) -> None:
    console.print(f"[bold]kata check[/] {escape(report.script)}  [dim]({report.device}, {report.seconds:.1f} s)[/]")
    if injected:
        console.print(f"injected bug: [{INJECTED[injected]}]{injected}[/]")
    if report.findings:
        console.print(findings_table(report.findings))
        plots = evidence_table([f for f in report.findings if verbose or f.failed])
        if plots is not None:
            console.print(plots)
    if report.detail:
        console.print(Text(report.detail, style="red"))
    if report.verdict in ("script-failed", "timeout", "interrupted") and report.output.strip():
        console.print("[dim]last lines the script printed:[/]")
        console.print(Text("\n".join(report.output.rstrip().splitlines()[-15:]), style="dim"))
    if report.output_truncated:
        console.print(f"[dim]output truncated, full log at {escape(report.log_path)}[/]")
    if report.verdict == "pass":
        console.print(f"[green]✓ {report.problem}[/]")
        if injected:
            kata = Path(report.script).stem
            console.print(f"Kata solved. Compare with the correct script: [bold]kata solution {kata}[/]; "
                          "see what is left: [bold]kata[/]")
    else:
        console.print(f"[red]✗ {escape(report.problem)}[/]")
        console.print(f"Edit the script, then run [bold]{escape(command)}[/] again.")
