"""The wheel carries the reference scripts, and an installed copy makes katas from any folder."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT

MARK = "\n\ndef packaged_copy():\n    pass\n"  # added to the installed references only


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=True, **kwargs)


def test_a_wheel_ships_the_references_and_works_from_an_empty_folder(tmp_path):
    source = tmp_path / "source"  # a copy, so that building leaves the working tree alone
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("katas", "checker"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist", source)
    [wheel] = (tmp_path / "dist").glob("torch_katas-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"katas/references/classifier.py", "katas/references/binary.py", "checker/probes/__init__.py"} <= set(names)

    site = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, wheel)
    for reference in (site / "katas" / "references").glob("*.py"):
        reference.write_text(reference.read_text() + MARK)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = run(sys.executable, "-c", "import katas.commands.common as c; print(c.__file__); print(c.REFERENCE_DIR)",
                cwd=empty, env=env).stdout.split()
    assert all(path.startswith(str(site)) for path in where), where  # the installed copy, not the source tree
    made = run(sys.executable, "-m", "katas", "new", "--seed", "1", "--no-verify", cwd=empty, env=env)
    assert "Started your workspace practice/" in made.stdout and "Wrote practice/01.py" in made.stdout
    assert "def packaged_copy():" in (empty / "practice" / "01.py").read_text()
    assert sorted(p.name for p in empty.rglob("*") if p.is_file()) == ["01.json", "01.py"]
