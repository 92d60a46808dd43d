"""The pytest plugin (entry point ``pytest11``, loaded once torch-katas is installed): a smoke test of one's own
training code in a test suite.

    def test_training_is_sound(kata_check):
        kata_check("train.py", steps=100, args=["--config", "small.yaml"]).assert_clean()

    def test_gradients_are_zeroed(kata_check):
        assert kata_check("train.py", steps=50).finding("zero-grad").status == "pass"

``kata_check`` takes what :func:`katas.api.check` takes; a relative script path, and a module given with
``module=``, are found from the rootdir of the test run (where ``pytest.ini`` or ``pyproject.toml`` is), so the test
passes from whichever folder pytest is started. ``--kata-device cuda`` runs every such check on the GPU. Importing
this plugin imports neither torch nor the checker: a test suite that never asks for the fixture pays nothing.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch-katas")
    group.addoption("--kata-device", choices=("cpu", "cuda"), default="cpu",
                    help="Where the scripts checked with the kata_check fixture train (default: cpu).")


@pytest.fixture
def kata_check(request: pytest.FixtureRequest) -> Callable:
    """``kata_check(script, steps=..., args=[...], ...)``: the script's report (checker.verdict.Report), checked as
    `kata check` would; see :func:`katas.api.check`."""
    root = Path(request.config.rootpath)
    device = request.config.getoption("kata_device")

    def run(script: str | os.PathLike | None = None, **options):
        from katas.api import check

        options.setdefault("device", device)
        if script is not None:
            script = root / script  # an absolute path stays as it is
        here = os.getcwd()
        os.chdir(root)  # a module run (module=...) is found from here, as `python -m` finds it
        try:
            return check(script, **options)
        finally:
            os.chdir(here)

    return run
