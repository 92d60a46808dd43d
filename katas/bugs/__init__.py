"""The bug catalogue, one module per bug, in teaching order."""
from __future__ import annotations

from katas.bugs import clip_order, detach, eval_mode, leak, log0, scheduler, train_mode, worker_seed, zero_grad
from katas.catalogue import Bug, UnknownBug

BUGS: dict[str, Bug] = {
    module.BUG.id: module.BUG
    for module in (zero_grad, leak, eval_mode, train_mode, detach, scheduler, log0, worker_seed, clip_order)
}


def lookup(bug_id: str) -> Bug:
    try:
        return BUGS[bug_id]
    except KeyError:
        raise UnknownBug(bug_id, list(BUGS)) from None
