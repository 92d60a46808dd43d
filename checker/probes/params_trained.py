"""params-trained: every parameter that runs in a model's forward and gets gradients is trained.

What is observed. Each parameter (an ``nn.Parameter`` that requires grad) that runs
inside a top-level module call (the model, a GAN's generator ...) is noted with that
*top* module, and whether it is *registered* there: among ``top.parameters()`` as
read while that forward runs. A parameter is *graded* once a backward pass gives it
a gradient that is not all zeros; its values are fingerprinted then (their norm, and
their sum in float64: :mod:`checker.params`) with the run's update count. It is *judged* once an update (an optimizer
step or a manual one) followed that first gradient and it was compared afterwards,
and *unchanged* when its fingerprint was bit-identical at every comparison. The
threshold is exact on purpose: any update that applies a gradient (an AdamW or SGD
step, weight decay, ``p -= lr * p.grad``) moves the fingerprint; only a learning rate of
0, or no update at all, leaves it bit-identical.

Rule: a graded, judged, unchanged parameter is an *orphan*, and the probe fails, when

(i) it is registered in none of the top modules whose forwards ran it (a block
    kept in a plain Python list or dict: ``top.parameters()``, and so an optimizer
    built from it, ``state_dict()`` and ``.to(device)``, leave it out). An
    optimizer that holds it in a group that never changes it (a learning rate of 0)
    does not make it trained: it is still an orphan; or
(ii) it is registered in a top module M, and an optimizer that holds parameters of M
    also holds *stale* ones: parameters that were in no top module that had run by
    that optimizer's first step, and by the end of the run still never ran in any
    forward, never received a gradient and are in no live top module. That is an
    optimizer built before part of M was replaced (``model.head = nn.Linear(...)``
    after it): it updates the old part, and the new one, which runs and gets
    gradients, never changes.

Cannot tell: stale parameters in an optimizer that holds nothing of a model that
ran (every part it held was replaced) link to no model; graded parameters of the
models that ran that never changed are then a part left out on purpose or a
replaced one (weights-update sees that optimizer change nothing).

Pass: no orphan. Why a correct script does not fail: what runs and is meant to
train is held by an optimizer (or updated by hand) and changes at its first update.
A part left out of training on purpose, registered in its model (head-only
fine-tuning: an optimizer over ``model.fc.parameters()`` while the backbone still
requires gradients; a group frozen with a learning rate of 0), meets neither (i) nor
(ii). Frozen parameters (``requires_grad=False``), EMA copies and teachers run
under ``no_grad`` get no gradient; a discriminator graded by the generator's loss
is trained by its own optimizer; manual SGD changes what it updates. A parameter
that also ran registered in another top module (a network called on its own too)
is not (i); a part that first runs after an optimizer's first step is not stale
at the end. Unregistered parameters that do change (handed to an optimizer
explicitly) pass, with a note: ``state_dict()`` still leaves them out, which is
not a training symptom.

Not told apart (documented limits): a network kept out of a model's
``parameters()`` on purpose, left requiring gradients, called only inside that
model's forward with gradients on (``requires_grad_(False)`` or ``no_grad`` says it
is frozen), fails by (i); an optimizer holding, beside a model's head, a module that
never runs at all, while the rest of the model gets gradients and no update, fails
by (ii). Parameters a module reads without calling the submodule that owns them
(``nn.MultiheadAttention``'s ``out_proj``) are not seen to run.

n/a: no gradient was followed by an update. Cost: per module call, one dict lookup
(each module read once per top module); per parameter, once, one norm and one host
sync at its first gradient contribution (at most ``MAX_ZERO_CHECKS`` more while its
contributions are all zeros); a top module's registration is read again at most
once per forward, when a parameter not yet seen runs in it. Only parameters that
may turn out orphans (unregistered ones, and those of a model linked to stale
parameters) are compared at updates: at each of the first ``FIRST_COMPARED``, then
every ``EVERY``-th, and once more at the end if they are still alive; a correct
script compares none.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from checker.events import Event
from checker.facts import RunFacts
from checker.findings import CANNOT_TELL, FAIL, NOT_APPLICABLE, PASS, Finding

ID = "params-trained"
TITLE = "every parameter in use is trained"
SYMPTOM_ID, SYMPTOM = "params-change", "parameters that get gradients change"
MAX_ZERO_CHECKS = 32  # all-zero gradient contributions of one parameter checked before giving up on it
FIRST_COMPARED, EVERY = 16, 16
SHOWN = 4  # parameter names shown


@dataclass
class Observation:
    graded: int = 0  # parameters whose first gradient an update followed
    unregistered: list[str] = field(default_factory=list)  # orphans by (i), by name
    replaced: list[str] = field(default_factory=list)  # orphans by (ii), by name
    held: int = 0  # orphans an optimizer holds
    updates: int = 0  # updates after the orphans' first gradients (the most)
    models: list[str] = field(default_factory=list)  # class names of the top modules the orphans ran in
    stale: list[dict] = field(default_factory=list)  # per optimizer holding stale parameters:
    # {"optimizer": class name, "params": how many, "linked": it holds parameters of a model that ran}
    undecided: int = 0  # unchanged graded parameters of models that ran, beside an unlinked stale optimizer
    trained_unregistered: int = 0  # unregistered graded parameters that did change (trained some other way)


class Observer:
    def __init__(self, session):
        import torch

        self.session = session
        self.parameter = torch.nn.Parameter
        self.first: dict[int, tuple[weakref.ref, float, int]] = {}  # graded: id -> (ref, norm, updates so far)
        self.zero: dict[int, int] = {}  # ungraded: all-zero contributions checked
        self.touched: set[int] = set()  # parameters that received any gradient
        self.visited: dict[tuple[int, int], weakref.ref] = {}  # (top id, module id) -> the module
        self.tops: dict[int, tuple[weakref.ref, set[int], int]] = {}  # top id -> (ref, its parameter ids, read at)
        self.homes: dict[int, set[int]] = {}  # parameter id -> tops it ran registered in
        self.strays: dict[int, tuple[set[int], str]] = {}  # parameter id -> (tops it ran unregistered in, name)
        self.loose: set[int] = set()  # ran, not judged: outside any top-level forward, frozen, or not a Parameter
        self.names: dict[int, str] = {}
        self.top_names: dict[int, str] = {}
        self.examined: set[int] = set()  # optimizers whose first step was read
        self.suspects: list[tuple[str, list[weakref.ref], set[int]]] = []  # (optimizer, stale-looking, linked tops)
        self.linked: set[int] = set()
        self.watch_all = False
        self.watched: dict[int, weakref.ref] = {}  # may turn out orphans, not yet seen changed
        self.judged: set[int] = set()
        self.changed: set[int] = set()
        session.on(Event.MODULE, ID, self.on_module)
        session.on(Event.GRAD, ID, self.on_grad)
        session.on(Event.UPDATE_PRE, ID, self.on_update_pre)
        session.on(Event.UPDATE_POST, ID, self.on_update_post)

    # -- what ran, and where it is registered ---------------------------------------------------------
    def on_module(self, module) -> None:
        forward = self.session.forward
        if forward is None:
            self.loose.update(id(p) for p in module._parameters.values() if p is not None)
            return
        key = (forward.module, id(module))
        seen = self.visited.get(key)
        if seen is not None and seen() is module:
            return
        self.visited[key] = weakref.ref(module)
        for name, p in module._parameters.items():
            if p is None:
                continue
            if not p.requires_grad or not isinstance(p, self.parameter):
                self.loose.add(id(p))
            elif self._registered(forward, p):
                self.homes.setdefault(id(p), set()).add(forward.module)
            else:
                tops, _ = self.strays.setdefault(id(p), (set(), self._stray_name(forward, module, name)))
                tops.add(forward.module)

    def _registered(self, forward, p) -> bool:
        """Whether ``p`` is among the parameters of the top module now running; read again once per forward."""
        entry = self.tops.get(forward.module)
        if entry is not None and entry[0]() is not None and (id(p) in entry[1] or entry[2] == forward.index):
            return id(p) in entry[1]
        top = forward.ref()
        ids = {id(q) for q in top.parameters()} if top is not None else {id(p)}
        self.tops[forward.module] = (forward.ref, ids, forward.index)
        self.top_names[forward.module] = forward.name
        return id(p) in ids

    def _stray_name(self, forward, module, key: str) -> str:
        """``Classifier.blocks.0.0.weight``: the path from the top module, through plain lists and dicts too."""
        top = forward.ref()
        path = find_path(top, module) if top is not None else None
        return f"{forward.name}.{path}{key}" if path is not None else f"{type(module).__name__}.{key}"

    # -- gradients and updates -------------------------------------------------------------------------------
    def on_grad(self, p, grad) -> None:
        pid = id(p)
        seen = self.first.get(pid)
        if seen is not None and seen[0]() is p:
            return
        self.touched.add(pid)
        checks = self.zero.get(pid, 0)
        if checks >= MAX_ZERO_CHECKS:
            return
        from checker.params import fingerprint
        from checker.tensors import any_nonzero

        nonzero = any_nonzero(grad)
        if not nonzero:
            self.zero[pid] = checks + 1
            return
        self.first[pid] = (weakref.ref(p), fingerprint(p), self.session.updates)
        self.changed.discard(pid)
        self.judged.discard(pid)
        if self._worth_watching(pid):
            self.watched[pid] = self.first[pid][0]

    def _worth_watching(self, pid: int) -> bool:
        homes = self.homes.get(pid)
        if pid in self.strays and not homes:
            return True
        return bool(homes) and (self.watch_all or bool(homes & self.linked))

    def on_update_pre(self, update) -> None:
        """At an optimizer's first step: does it hold parameters of no model that ran, that never ran themselves?"""
        if update.manual or id(update.optimizer) in self.examined:
            return
        self.examined.add(id(update.optimizer))
        tops = {}
        for key, (ref, _, _) in list(self.tops.items()):
            top = ref()
            if top is not None:
                tops[key] = {id(q) for q in top.parameters()}
        everywhere = set().union(*tops.values())
        ran = self.homes.keys() | self.strays.keys() | self.loose
        suspects = [p for p in update.params if id(p) not in everywhere and id(p) not in ran
                    and id(p) not in self.touched]
        if not suspects:
            return
        linked = {key for key, ids in tops.items() if any(id(p) in ids for p in update.params)}
        self.suspects.append((type(update.optimizer).__name__, [weakref.ref(p) for p in suspects], linked))
        self.linked |= linked
        self.watch_all = self.watch_all or not linked
        for key in (linked or tops):
            top = self.tops[key][0]()
            for name, q in top.named_parameters():
                self.names.setdefault(id(q), f"{self.top_names[key]}.{name}")
        for pid, (ref, _, _) in self.first.items():
            if pid not in self.changed and self._worth_watching(pid):
                self.watched[pid] = ref

    def on_update_post(self, update) -> None:
        n = self.session.updates
        if self.watched and (n <= FIRST_COMPARED or n % EVERY == 0):
            self._compare()

    def _compare(self) -> None:
        """Compare the watched parameters (alive) with their values at their first gradient."""
        alive = [(pid, p) for pid, ref in list(self.watched.items()) if (p := ref()) is not None]
        if not alive:
            return
        from checker.params import fingerprints, same

        norms = fingerprints([p for _, p in alive])
        now = self.session.updates
        for (pid, _), norm in zip(alive, norms):
            _, value, before = self.first[pid]
            if now <= before:
                continue
            self.judged.add(pid)
            if not same(norm, value):
                self.changed.add(pid)
                del self.watched[pid]

    # -- the verdict's material ---------------------------------------------------------------------------
    def summary(self) -> Observation:
        self._compare()
        now = self.session.updates
        graded = [pid for pid, (_, _, before) in self.first.items() if before < now]
        unchanged = self.judged - self.changed
        strays = {pid for pid, _ in self.strays.items() if not self.homes.get(pid)}
        unregistered = [pid for pid in self.strays if pid in unchanged and pid in strays]  # in the order they ran
        stale, linked = self._stale()
        replaced = sorted((pid for pid in unchanged - strays if self.homes.get(pid, set()) & linked),
                          key=lambda pid: self.names.get(pid, ""))
        unlinked = any(not entry["linked"] for entry in stale)
        undecided = [pid for pid in unchanged - strays - set(replaced) if self.homes.get(pid)] if unlinked else []
        orphans = unregistered + replaced
        held = {id(p) for opt in self.session.optimizers for group in opt.param_groups for p in group["params"]}
        tops = set().union(*(self.strays[pid][0] for pid in unregistered), *(self.homes[pid] for pid in replaced))
        return Observation(
            graded=len(graded),
            unregistered=[self.strays[pid][1] for pid in unregistered],
            replaced=[self.names.get(pid, "an unnamed parameter") for pid in replaced],
            held=sum(pid in held for pid in orphans),
            updates=max((now - self.first[pid][2] for pid in orphans), default=0),
            models=sorted({self.top_names.get(key, "a model") for key in tops}),
            stale=stale,
            undecided=len(undecided),
            trained_unregistered=len(strays & self.changed),
        )

    def _stale(self) -> tuple[list[dict], set[int]]:
        """The optimizers' stale parameters, read again at the end (still never run, never graded, in no live
        model), and the models linked to them."""
        alive = [ref() for ref, _, _ in self.tops.values()]
        registered = set().union(*({id(q) for q in top.parameters()} for top in alive if top is not None))
        ran = self.homes.keys() | self.strays.keys() | self.loose | self.touched | registered
        found, linked = [], set()
        for optimizer, refs, tops in self.suspects:
            still = [p for ref in refs if (p := ref()) is not None and id(p) not in ran]
            if still:
                found.append({"optimizer": optimizer, "params": len(still), "linked": bool(tops)})
                linked |= tops
        return found, linked


def find_path(top, target) -> str | None:
    """The dotted path (ending in a dot) from ``top`` to the module ``target``, through submodules and through
    plain lists, tuples and dicts held as attributes; None when it cannot be reached."""
    import torch

    stack, seen = [(top, "")], set()
    while stack:
        module, path = stack.pop()
        if module is target:
            return path
        if id(module) in seen:
            continue
        seen.add(id(module))
        children = [(name, child) for name, child in module._modules.items() if child is not None]
        for name, value in vars(module).items():
            if name.startswith("_") or not isinstance(value, (list, tuple, dict)) or len(value) > 10_000:
                continue
            items = value.items() if isinstance(value, dict) else enumerate(value)
            children += [(f"{name}.{k}", item) for k, item in items if isinstance(item, torch.nn.Module)]
        stack += [(child, f"{path}{name}.") for name, child in reversed(children)]
    return None


def _shown(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def judge(obs: Observation, facts: RunFacts) -> Finding:
    if not obs.graded:
        why = ("no update followed a gradient" if facts.backwards else "no backward pass ran")
        return Finding(ID, TITLE, NOT_APPLICABLE, message=f"{why}: there is no training to judge")
    orphans = obs.unregistered + obs.replaced
    measured, threshold = f"{len(orphans)} of {obs.graded} tensors", "0"
    models = " and ".join(obs.models) or "the model"
    if orphans:
        observed = (f"{len(orphans)} parameter tensors that ran in {models}'s forward and received gradients "
                    f"stayed exactly as they were through {obs.updates} updates ({_shown(orphans)})")
        if obs.unregistered:
            n = len(obs.unregistered)
            message = (f"{n} parameter tensors ran inside {models}'s forward and received gradients, but are not "
                       f"among its parameters() ({_shown(obs.unregistered)}): a part kept in a plain list or dict "
                       "is not registered, so an optimizer built from parameters() does not hold it, state_dict() "
                       "leaves it out and .to(device) does not move it. They never changed")
            if obs.held:
                message += f"; an optimizer holds {obs.held} of them, but never changed them (a learning rate of 0?)"
        else:
            stale = [s for s in obs.stale if s["linked"]]
            holders = ", ".join(f"{s['optimizer']} ({s['params']})" for s in stale)
            message = (f"{len(obs.replaced)} parameter tensors of {models} ran and received gradients but never "
                       f"changed ({_shown(obs.replaced)}), while the optimizer that trains the rest holds "
                       f"parameters that never ran in any forward: {holders}. It was built before part of the model "
                       "was replaced, so it holds the old part, not the new one")
        return Finding(ID, TITLE, FAIL, measured, threshold, message, observed=observed)
    if obs.undecided:
        holders = ", ".join(f"{s['optimizer']} ({s['params']})" for s in obs.stale if not s["linked"])
        return Finding(ID, TITLE, CANNOT_TELL, measured, threshold,
                       f"an optimizer holds only parameters that never ran in any forward ({holders}), and "
                       f"{obs.undecided} parameter tensors of the models that ran received gradients but never "
                       "changed: a part left out of training on purpose cannot be told from a replaced one",
                       observed=f"{obs.undecided} parameter tensors received gradients but never changed, while "
                                "an optimizer holds parameters that never ran")
    message = (f"{obs.graded} parameter tensors received gradients before an update: none stayed unchanged while "
               "running outside its model's parameters(), and no optimizer holds parts that never ran")
    if obs.trained_unregistered:
        message += (f"; {obs.trained_unregistered} ran outside their model's parameters() but were trained all the "
                    "same (state_dict() leaves them out)")
    return Finding(ID, TITLE, PASS, measured, threshold, message,
                   observed=f"{obs.graded} parameter tensors received gradients before an update; none of them was "
                            "seen left untrained")
