"""Every hand-written fixture fails exactly the probes its first line names.

A fixture's first line reads ``# expect: probe-a probe-b`` (empty: all pass). Broken
variants name their probe, alternative correct fixes name none, masks name the
probe they fail to fix (and anything else they break). ``probe?`` means that probe
must say it cannot tell (which is not a pass: a kata is not solved by it);
``probe~`` that it must give advice (the check passes; a kata of it is not solved).
A probe that only ever advises (``ADVISES``) is named plainly.
``raises`` means the script must stop with an exception, reported as such.
"""
from __future__ import annotations

import pytest
from conftest import ADVISORY, FIXTURES, failed_probes

from checker.findings import ADVICE, CANNOT_TELL

SCRIPTS = sorted(p for p in FIXTURES.glob("*.py") if not p.name.startswith("kit"))


def expectations(path) -> list[str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path.name} must start with '# expect:'"
    return first.removeprefix("# expect:").split()


def expected(path) -> set[str]:
    return {token.rstrip("~") for token in expectations(path) if not token.endswith("?")}


def advised(path) -> set[str]:
    return {token[:-1] for token in expectations(path) if token.endswith("~")} | (expected(path) & ADVISORY)


def undecided(path) -> set[str]:
    return {token[:-1] for token in expectations(path) if token.endswith("?")}


@pytest.fixture(scope="module")
def reports(request, checked):
    """Checks, side by side, the fixtures whose tests were selected (e.g. with -k)."""
    selected = [item.callspec.params["script"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    return dict(zip(selected, checked(*selected)))


def assert_as_expected(script, report) -> None:
    """The report fails exactly the probes the script's first line names, and cannot tell those marked ``?``."""
    if "raises" in expectations(script):
        assert (report.verdict, report.exit_code) == ("script-failed", 3), f"{report.problem}\n{report.output}"
        assert report.problem.startswith("the script raised "), report.problem
        return
    assert report.verdict in ("pass", "fail"), f"{report.problem}\n{report.detail}\n{report.output}"
    details = "\n".join(f"{f.probe}: {f.status} {f.message}" for f in report.findings)
    assert failed_probes(report) == expected(script), details
    assert {f.probe for f in report.findings if f.status == CANNOT_TELL} >= undecided(script), details
    assert {f.probe for f in report.findings if f.status == ADVICE} == advised(script), details
    failing = expected(script) - advised(script)
    assert (report.verdict, report.exit_code) == (("fail", 1) if failing else ("pass", 0))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_fixture_fails_exactly_the_expected_probes(script, reports):
    assert_as_expected(script, reports[script])
