"""The timeline's names for modules: ids are reused once an object is gone, serials never are."""
from __future__ import annotations

from torch import nn

from checker.session import Session


def test_a_module_that_reuses_a_dead_modules_id_gets_a_new_serial():
    session = Session("unused")
    kept = nn.Linear(2, 2)
    ids, serials = [], []
    for _ in range(50):  # each model thrown away before the next is built: CPython hands its memory, and so its
        model = nn.Linear(2, 2)  # id, to a later object
        ids.append(id(model))
        serials.append(session.serial(model))
        assert session.serial(model) == serials[-1]  # the same module keeps its number
        del model
    assert len(set(ids)) < len(ids), "no id came back: nothing was tested"
    assert len(set(serials)) == len(serials)
    assert session.serial(kept) not in serials
