"""Second copies of a trained network (a target network, a teacher averaged from the student, an EMA model) and
what they hold when they run.

A copy is a module called at top level whose parameters no optimizer was given, with the same parameter shapes, in
the same order, as a module whose parameters an optimizer trains; or a shallow copy of such a module
(``copy.copy``: another module of the same class holding the very same parameters). The copies of one shape are
followed together (one kept, or a fresh one per update). Its stretches are counted between the updates of the
optimizer that trains the module of its shapes (an actor-critic steps two or three optimizers; each target follows
one network). In each stretch, the first call of a copy compares a fixed sample of up to 64 elements of each of its
parameters with the same elements of each trained module of its shapes. A stretch in which no trained module of its
shapes moved since the last comparison is not counted: a copy cannot lag behind weights that stand still (updates
that change nothing, the gradients reset before the step).

A trained module loaded (``load_state_dict``) with the weights a copy of its shapes holds, or found holding them
at a comparison when its weights moved and the copy's did not since the copy last ran (set to them by hand:
``p.data.copy_(t.data)``), is *reset to its copy*.
When such a load puts back exactly the weights the previous one did, after updates, those updates were thrown away,
unless the copy moves at some point of the run (a federated round's global model, loaded into one local model per
client and averaged from them once a round): a copy that never moves, to which the trained network keeps returning,
is a sync written backwards (``online.load_state_dict(target.state_dict())``).
"""
from __future__ import annotations

from dataclasses import dataclass

from checker.events import Event
from checker.probes._shared.fast_weights import TrainedParams
from checker.probes._shared.samples import indices, sample

OWNER = "copies"  # its subscriptions and errors; the probes that read it name it in USES
EVERY_UPDATE = 0.9  # a copy that runs in this share of the stretches between its network's updates is a per-update
MIN_UPDATES = 20  # copy (a target, a teacher), over at least this many updates


@dataclass
class Copy:
    name: str  # its class name
    shapes: str  # its parameters' shapes, for the report
    first: int  # its network's updates made before its first call
    updates: int = 0  # its network's updates by the end of the run
    stretches: int = 0  # stretches between those updates it ran in
    equal: int = 0  # ... holding exactly a trained module's weights
    shared: bool = False  # its weights are the trained weights' own storage (a detached view, a shallow copy)
    resets: int = 0  # loads of a trained module with its weights that put back what the previous such load did
    discarded: int = 0  # the updates made between those loads: thrown away by them
    moved: bool = False  # some load from a copy put back other weights than the one before: the copy moves


def per_update(copy: Copy) -> bool:
    """Whether the copy ran at (nearly) every update of its network, over enough of them: a per-update target."""
    since = copy.updates - copy.first
    return since >= MIN_UPDATES and copy.stretches >= EVERY_UPDATE * since


class Copies:
    """Made once per session (``session.shared(Copies)``)."""

    def __init__(self, session):
        import weakref

        self.ref = weakref.ref
        self.trained = session.shared(TrainedParams)
        self.modules: dict[int, tuple] = {}  # module serial -> (parameter references, shapes, module reference)
        self.trained_modules: dict[tuple, list[int]] = {}  # shapes -> serials of modules with trained parameters
        self.shallow: set[int] = set()  # serials of shallow copies of a trained module
        self.firsts: dict[int, set] = {}  # id of a trained module's first trained parameter -> the shapes of the
        # modules it begins (a network, and its first layer where that also ran at top level)
        self.updates: dict[tuple, int] = {}  # shapes -> updates of the trained modules of those shapes
        self.records: dict[tuple, Copy] = {}  # shapes -> the record of the copies of those shapes
        self.last: dict[tuple, int] = {}  # shapes -> the update count at the last comparison
        self.seen: dict[int, list] = {}  # trained module serial -> the sample of its weights at the last comparison
        self.copy_modules: dict[tuple, list[int]] = {}  # shapes -> serials of the copies compared so far
        self.copy_seen: dict[int, list] = {}  # copy serial -> the sample of its weights at its last comparison
        self.reset_to: dict[int, tuple] = {}  # id of a trained module's first parameter -> (the sample its last load
        # from a copy put back, the update count then)
        session.on(Event.FORWARD, OWNER, self.on_forward)
        session.on(Event.UPDATE_POST, OWNER, self.on_update)
        session.on(Event.LOAD_STATE, OWNER, self.on_load)

    def on_update(self, update) -> None:
        counted = set().union(*(self.firsts[key] for key in map(id, update.params) if key in self.firsts))
        for shapes in counted:
            self.updates[shapes] = self.updates.get(shapes, 0) + 1

    def on_forward(self, forward) -> None:
        if not self.trained.params:
            return
        known = self.modules.get(forward.module) or self._learn(forward)
        if known is None:
            return
        refs, shapes, _ = known
        if not refs or shapes not in self.trained_modules or \
                (forward.module in self.trained_modules[shapes] and forward.module not in self.shallow):
            return
        updates = self.updates.get(shapes, 0)
        if self.last.get(shapes) == updates:
            return  # a copy of these shapes was compared already in this stretch
        params = [r() for r in refs]
        shallow = forward.module in self.shallow
        if any(p is None for p in params) or (not shallow and any(p in self.trained for p in params)):
            return
        self.last[shapes] = updates
        record = self.records.get(shapes)
        if record is None:
            record = self.records[shapes] = Copy(forward.name, describe(shapes), updates)
        if forward.module not in self.copy_modules.setdefault(shapes, []):
            self.copy_modules[shapes].append(forward.module)
        held, held_before = snapshot(params), self.copy_seen.get(forward.module)
        self.copy_seen[forward.module] = held
        still = held_before is not None and alike(held, held_before)  # the copy did not move since it last ran
        moving = []  # the trained modules of these shapes whose weights moved since the last comparison
        for serial in self.trained_modules[shapes]:
            if serial == forward.module or serial in self.shallow:
                continue
            trained = [r() for r in self.modules[serial][0]]
            if any(p is None for p in trained):
                continue
            now, before = snapshot(trained), self.seen.get(serial)
            self.seen[serial] = now
            if before is None or not alike(now, before):
                moving.append((trained, now))
        if not moving:  # weights that stand still leave a copy nothing to lag behind
            return
        record.stretches += 1
        for trained, now in moving:
            if same_storage(params, trained):
                record.shared = True
            if equal(params, trained):
                record.equal += 1
                if still:  # the trained weights moved onto a copy that did not: set to it (by hand, or loaded)
                    self._reset(record, trained, now, updates)
                break

    def on_load(self, module, state_dict, result) -> None:
        """A trained module loaded with a copy's weights: a reset when it puts back what the last one did."""
        params = list(module.parameters())
        if not params or not all(p in self.trained for p in params):
            return
        shapes = tuple(tuple(p.shape) for p in params)
        record = self.records.get(shapes)
        if record is None:
            return
        now = snapshot(params)
        for serial in self.copy_modules.get(shapes, ()):
            copy = [r() for r in self.modules[serial][0]]
            if not any(p is None for p in copy) and alike(now, snapshot(copy)):
                self._reset(record, params, now, self.updates.get(shapes, 0))
                return

    def _reset(self, record: Copy, trained: list, now: list, updates: int) -> None:
        """The trained module was set to a copy's weights (``now``, their sample) after ``updates`` updates: a reset
        that discarded the updates since the last one when it put back the same weights."""
        before = self.reset_to.get(id(trained[0]))
        if before is not None and not alike(now, before[0]):
            record.moved = True
        elif before is not None and updates > before[1]:
            record.resets += 1
            record.discarded += updates - before[1]
        self.reset_to[id(trained[0])] = (now, updates)

    def _learn(self, forward) -> tuple | None:
        module = forward.ref()
        if module is None:
            return None
        params = list(module.parameters())
        known = self.modules[forward.module] = (tuple(self.ref(p) for p in params),
                                                 tuple(tuple(p.shape) for p in params), self.ref(module))
        # trained: an optimizer holds its parameters, all but frozen ones (DINO's head keeps a weight norm fixed)
        if any(p in self.trained for p in params) and all(p in self.trained or not p.requires_grad for p in params):
            shapes = known[1]
            if any(shallow_copy(module, self.modules[s][2]()) for s in self.trained_modules.get(shapes, ())):
                self.shallow.add(forward.module)
            else:
                first = next(p for p in params if p in self.trained)  # an update lists it (not a frozen one)
                self.firsts.setdefault(id(first), set()).add(shapes)
            self.trained_modules.setdefault(shapes, []).append(forward.module)
        return known

    def copies(self) -> list[Copy]:
        for shapes, record in self.records.items():
            record.updates = self.updates.get(shapes, 0)
        return list(self.records.values())


def shallow_copy(module, other) -> bool:
    """``copy.copy`` of the other: another module of its class whose parameter and submodule tables are the
    other's own (a wrapper, DDP or a compiled module, is of another class)."""
    return other is not None and other is not module and type(other) is type(module) \
        and module.__dict__.get("_parameters") is other.__dict__.get("_parameters") \
        and module.__dict__.get("_modules") is other.__dict__.get("_modules")


def describe(shapes: tuple) -> str:
    return f"{len(shapes)} tensors, the first {'x'.join(map(str, shapes[0])) or 'scalar'}"


def equal(copy: list, trained: list) -> bool:
    import torch

    with torch.no_grad():
        for a, b in zip(copy, trained):
            if a.layout != torch.strided or b.layout != torch.strided or a.device != b.device:
                return False
            if a.numel() == 0:
                continue
            index = indices(a)
            if not torch.equal(sample(a, index), sample(b, index)):
                return False
    return True


def snapshot(params: list) -> list:
    """The sampled elements of each parameter, copied (None for a tensor kind that cannot be sampled)."""
    import torch

    with torch.no_grad():
        return [sample(p, indices(p)).clone() if p.layout == torch.strided and p.numel() else None for p in params]


def alike(a: list, b: list) -> bool:
    import torch

    return all((x is None) == (y is None) and (x is None or (x.shape == y.shape and torch.equal(x, y)))
               for x, y in zip(a, b))


def same_storage(copy: list, trained: list) -> bool:
    try:
        return all(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
                   for a, b in zip(copy, trained))
    except (RuntimeError, NotImplementedError):  # a tensor kind without storage
        return False
