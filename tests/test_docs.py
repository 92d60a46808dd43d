"""The generated reference pages match the registry they are generated from, and the README points to them."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ROOT

from katas import docs
from katas.cli import main


@pytest.mark.parametrize("name", sorted(docs.pages()))
def test_a_generated_page_matches_the_registry(name):
    written = (ROOT / "docs" / name).read_text()
    assert written == docs.pages()[name](), f"docs/{name} drifted from the catalogue: run `python -m katas.docs`"


def test_the_bug_page_says_what_kata_bugs_says():
    listed = json.loads(CliRunner().invoke(main, ["bugs", "--json"]).output)["bugs"]
    page = (ROOT / "docs" / "bugs.md").read_text()
    for bug in listed:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{bug['id']}` |"))
        assert row.endswith(f"| {', '.join(bug['references'])} |"), row
        assert all(f"`{probe}`" in row for probe in bug["probes"]), row


def test_the_readme_links_the_pages_and_holds_no_copy_of_their_tables():
    readme = (ROOT / "README.md").read_text()
    assert "docs/bugs.md" in readme and "docs/probes.md" in readme
    assert "| `zero-grad` |" not in readme and "| `grads-accumulate` |" not in readme


def test_the_readme_stays_an_introduction():
    """What it is, the two set-up commands first, the commands, links: the details live in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 10_500
    blocks = readme.split("```")[1::2]
    assert "kata check reference/classifier.py" in blocks[0] and "python -m pytest" in blocks[1]
    for page in ("check.md", "new.md", "interview.md", "bugs.md", "probes.md"):
        assert f"docs/{page}" in readme and (ROOT / "docs" / page).exists()
