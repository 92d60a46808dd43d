"""The event bus of an observed run: probes subscribe to :class:`~checker.events.Event` members, the timeline
and the update ledger emit them, and a failure of a probe's own stays that probe's error."""
from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable

from checker.clock import CHECKER
from checker.events import Event


def safe(method: Callable) -> Callable:
    """A timeline method called from a hook: a failure of the checker's own is the session's error (every probe
    reports it), never an exception in the script; after one, the session observes nothing more."""

    @functools.wraps(method)
    def guarded(self: "EventBus", *args: Any) -> Any:
        if "session" in self.errors:
            return None
        try:
            return method(self, *args)
        except Exception as exc:  # noqa: BLE001 - the checker must never change what the script does
            self.errors["session"] = f"{type(exc).__name__}: {exc}"
            return None

    return guarded


@dataclass(kw_only=True)
class EventBus:
    errors: dict[str, str] = field(default_factory=dict)  # owner (a probe's id, "session") -> its failure
    _listeners: dict[Event, list[tuple[str, Callable]]] = field(default_factory=lambda: defaultdict(list))
    _shared: dict[type, Any] = field(default_factory=dict)  # shared measurements, by kind
    clock: Any = None  # a checker.clock.PhaseClock in a profiled run (its observers' time is the checker's)

    def on(self, event: Event, owner: str, callback: Callable) -> None:
        self._listeners[event].append((owner, callback))

    def shared(self, kind: type) -> Any:
        """The session's one instance of a shared measurement (:mod:`checker.probes._shared`), made on first use
        with the session, so that probes that read the same measurement never reach into each other."""
        found = self._shared.get(kind)
        if found is None:
            found = self._shared[kind] = kind(self)
        return found

    @contextlib.contextmanager
    def muted(self) -> Iterator[None]:
        """No event reaches a probe inside (a probe running a copy of the model of its own)."""
        listeners, self._listeners = self._listeners, defaultdict(list)
        try:
            yield
        finally:
            self._listeners = listeners

    def listening(self, event: Event) -> bool:
        """Whether a probe that has not failed subscribed to ``event``."""
        return any(owner not in self.errors for owner, _ in self._listeners[event])

    def emit(self, event: Event, *args: Any) -> None:
        if self.clock is not None and self._listeners[event]:
            with self.clock.phase(CHECKER):
                self._dispatch(event, args)
        else:
            self._dispatch(event, args)

    def _dispatch(self, event: Event, args: tuple) -> None:
        for owner, callback in self._listeners[event]:
            if owner in self.errors:
                continue
            try:
                callback(*args)
            except Exception as exc:  # a probe's bug must never break the user's script
                self.errors[owner] = f"{type(exc).__name__}: {exc}"
