"""Second copies of a trained network (:mod:`checker.probes._shared.copies`), as health's premise reads them."""
from __future__ import annotations

from conftest import FIXTURES, check


def test_a_teacher_is_a_copy_even_when_its_student_keeps_a_parameter_no_optimizer_holds():
    # DINO's student freezes one weight of its head and gives the optimizer only the others: the student is still
    # the trained network, and the averaged teacher that runs at every step is its copy, whose targets move.
    report = check(FIXTURES / "health__fix_teacher_of_a_student_with_a_frozen_parameter.py")
    health = next(f for f in report.findings if f.probe == "health")
    falls = next(part for part in health.parts if part.probe == "health.loss-falls")
    assert falls.status == "n/a" and "a copy of the trained network runs at every update" in falls.message, falls
