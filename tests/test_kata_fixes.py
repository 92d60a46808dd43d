"""A kata is solved by every correct fix, however it is written, and stays unsolved under every mask.

For each bug of the catalogue, ``tests/kata_variants.py`` holds at least three fixes written unlike the
textbook one (undoing the plant) and two masks, as edits to the bug's ``--plain`` kata. Each variant is checked
as a kata (its folder holds the kata's metadata), and judged by the same code ``kata check`` judges a kata with:
a fix must leave the kata solved with its bug "fixed", never "cannot tell"; a mask must leave it unsolved.
"""
from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner
from conftest import WORKERS, check
from kata_variants import VARIANTS

from katas.bugs import BUGS
from katas.cli import main
from katas.commands.check import expectation, record_kata

CASES = [(bug, kind, name) for bug, spec in VARIANTS.items() for kind in ("fixes", "masks") for name in spec[kind]]


def apply(text: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        assert text.count(old) == 1, f"the edit's text is not in the kata exactly once: {old!r}"
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def katas(tmp_path_factory) -> dict[str, tuple]:
    """Each bug planted once into its reference, as ``kata new --plain --seed 0`` writes it: (folder, text)."""
    made = {}
    for bug, spec in VARIANTS.items():
        folder = tmp_path_factory.mktemp(bug)
        done = CliRunner().invoke(main, ["new", "--bug", bug, "--ref", spec["ref"], "--plain", "--seed", "0", "--no-verify",
                                         "--dir", str(folder)])
        assert done.exit_code == 0, done.output
        made[bug] = (folder, (folder / "01.py").read_text())
    return made


@pytest.fixture(scope="module")
def judged(katas, tmp_path_factory) -> dict[tuple, tuple]:
    """(bug, kind, name) -> (solved, the bug's status, the problem line), every variant checked side by side."""
    jobs = []
    for bug, kind, name in CASES:
        source, text = katas[bug]
        folder = tmp_path_factory.mktemp("variant")
        shutil.copytree(source / ".kata", folder / ".kata")
        (folder / "01.py").write_text(apply(text, VARIANTS[bug][kind][name]))
        jobs.append(((bug, kind, name), folder / "01.py"))

    def judge(job):
        case, path = job
        report = check(path, expect=expectation(path))
        status = record_kata(path, report) if report.ran else None
        return case, (report.exit_code == 0, status, report.problem)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(pool.map(judge, jobs))


def test_every_bug_has_three_fixes_unlike_the_textbook_one_and_two_masks():
    assert set(VARIANTS) == set(BUGS)
    short = {bug: (len(spec["fixes"]), len(spec["masks"])) for bug, spec in VARIANTS.items()
             if len(spec["fixes"]) < 3 or len(spec["masks"]) < 2}
    assert not short, short


@pytest.mark.parametrize(("bug", "kind", "name"), CASES, ids=[f"{b}-{k[:-1] if k == 'masks' else 'fix'}-{n}"
                                                             for b, k, n in CASES])
def test_a_fix_solves_its_kata_and_a_mask_does_not(bug, kind, name, judged):
    solved, status, problem = judged[bug, kind, name]
    if kind == "fixes":
        assert solved and status == "fixed", f"{status}: {problem}"
    else:
        assert not solved, f"{status}: {problem}"


def test_the_command_line_judges_a_fix_and_a_mask_as_the_test_does(katas, tmp_path):
    """The same judgement through `kata check` itself: exit status, and the kata's bug in the JSON."""
    for kind, name, code, status in (("fixes", "zero after the step", 0, "fixed"),
                                     ("masks", "a smaller learning rate", 1, "still present")):
        folder = tmp_path / kind
        shutil.copytree(katas["zero-grad"][0] / ".kata", folder / ".kata")
        (folder / "01.py").write_text(apply(katas["zero-grad"][1], VARIANTS["zero-grad"][kind][name]))
        done = CliRunner().invoke(main, ["check", "--json", str(folder / "01.py")])
        assert (done.exit_code, json.loads(done.output)["kata"]["injected_bug"]) == (code, status), done.output
