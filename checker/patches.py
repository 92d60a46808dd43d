"""The one registry of everything the checker changes in torch and in Python itself.

The instrumentation (:mod:`checker.instrument`) and every probe change torch only
through a :class:`Patches`: an attribute replaced by a wrapper (``torch.save``,
``builtins.print``, ``DataLoader.__iter__`` ...) with :meth:`Patches.patch`, or a
global hook added to one of torch's hook registries (every module's forward,
every optimizer step, every parameter registration) with :meth:`Patches.hook`.
Each is remembered, so :meth:`Patches.tampering` names what a script removed or
put back (``torch.save = original``, ``builtins.print = ...``, a hook dict
cleared): such a run is not trusted to have passed anything. Callbacks a probe
adds are guarded: an exception in the checker's own code is that probe's error,
never the script's.
"""
from __future__ import annotations

import functools
from typing import Any, Callable


class Patches:
    def __init__(self, errors: dict[str, str]):
        self.errors = errors  # owner (a probe's id, or "session") -> its first error
        self._patched: dict[tuple[int, str], tuple[Any, str, Any]] = {}  # the outermost replacement of each attribute
        self._originals: list[tuple[Any, str, Any, bool]] = []  # (owner, name, what was there, set on owner itself)
        self._hooks: list[tuple[Any, str, Any, int]] = []  # (owner of the registry, its name, the registry, hook id)
        self._handles: list[Any] = []
        self._unwatched: set[tuple[int, str]] = set()  # patches a script may replace (see ``patch``)

    def patch(self, owner: Any, name: str, replacement: Any, watched: bool = True) -> Any:
        """Replace ``owner.name`` by ``replacement``; returns what was there. ``watched=False``: a patch that only
        informs a premise, which a script may replace in turn (a library that wraps ``Categorical.sample``) without
        that counting as tampering."""
        original = getattr(owner, name)
        own = name in vars(owner) if isinstance(owner, type) else True
        self._originals.append((owner, name, vars(owner)[name] if isinstance(owner, type) and own else original, own))
        setattr(owner, name, replacement)
        self._patched[id(owner), name] = (owner, name, replacement)
        if not watched:
            self._unwatched.add((id(owner), name))
        return original

    def hook(self, owner: Any, registry: str, handle: Any) -> Any:
        """Remember a hook just added to ``owner.registry`` (a dict of hooks) under ``handle``; returns the handle."""
        self._hooks.append((owner, registry, getattr(owner, registry), handle.id))
        self._handles.append(handle)
        return handle

    def forward_pre_hook(self, who: str, callback: Callable) -> Any:
        """A global module forward pre-hook of ``who``'s (guarded); returns its handle."""
        from torch.nn.modules import module as module_hooks

        return self.hook(module_hooks, "_global_forward_pre_hooks",
                         module_hooks.register_module_forward_pre_hook(self.guarded(who, callback)))

    def forward_hook(self, who: str, callback: Callable, with_kwargs: bool = False) -> Any:
        """A global module forward hook of ``who``'s (guarded); returns its handle."""
        from torch.nn.modules import module as module_hooks

        return self.hook(module_hooks, "_global_forward_hooks", module_hooks.register_module_forward_hook(
            self.guarded(who, callback), with_kwargs=with_kwargs))

    def remove(self, handle: Any) -> None:
        """Remove a hook the checker no longer needs (not tampering)."""
        handle.remove()
        self._hooks = [entry for entry in self._hooks if entry[3] != handle.id]

    def guarded(self, who: str, callback: Callable) -> Callable:
        """``callback``, except that once it raised (or ``who`` failed elsewhere) it does nothing and returns None:
        the failure is ``who``'s error in the report, and the script goes on as it would without the checker."""

        @functools.wraps(callback)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if who in self.errors:
                return None
            try:
                return callback(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a checker's bug must never break the user's script
                self.errors[who] = f"{type(exc).__name__}: {exc}"
                return None

        return guarded

    def tampering(self) -> list[str]:
        """What the script removed or replaced of the registry's patches and hooks (empty when intact)."""
        found = [f"{getattr(owner, '__name__', owner)}.{registry}" for owner, registry, hooks, hook_id in self._hooks
                 if getattr(owner, registry, None) is not hooks or hook_id not in hooks]
        found += [f"{getattr(owner, '__qualname__', getattr(owner, '__name__', owner))}.{name}"
                  for key, (owner, name, replacement) in self._patched.items()
                  if key not in self._unwatched and _current(owner, name) is not replacement]
        return list(dict.fromkeys(found))

    def undo(self) -> None:
        """Put back everything, in reverse order (for a checker used inside another process, and for tests)."""
        for owner, name, original, own in reversed(self._originals):
            if own:
                setattr(owner, name, original)
            else:  # it was inherited: the class gets its own attribute removed again
                delattr(owner, name)
        for handle in reversed(self._handles):
            handle.remove()
        self._originals, self._handles, self._hooks = [], [], []
        self._patched.clear()
        self._unwatched.clear()

    def patched(self) -> list[tuple[Any, str]]:
        """Every (owner, attribute name) replaced and watched, for the tests that undo each one."""
        return [(owner, name) for key, (owner, name, _) in self._patched.items() if key not in self._unwatched]


def _current(owner: Any, name: str) -> Any:
    """The attribute as set on ``owner`` itself (a class's own ``__dict__``, a module's attribute)."""
    if isinstance(owner, type):
        return vars(owner).get(name)
    return getattr(owner, name, None)
