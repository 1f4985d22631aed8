"""Faults on demand: one nsqlookupd misbehaving on purpose, for tests (issue #18).

:class:`LookupdFaults` holds the lasting faults of one
:class:`~.core.NSQLookupd`, listed and lifted as nsqd's are
(:class:`~nsqbox.broker.faults.FaultList`):

- ``hide_producers``: ``/lookup`` for the topic (every topic without one)
  answers as if it had no producers: its channels, and ``"producers": []``.
  Consumers that discover through nsqlookupd find no nsqd to connect to.
- ``lookupd_down``: nsqlookupd's HTTP API stops answering: a request waits
  until the fault ends (the client's own timeout usually ends it first), as a
  server that hangs. nsqd's TCP registrations go on, so when it answers again it
  knows every producer, as a lookupd whose HTTP side was cut off would. The
  ``/nsqbox/faults`` routes keep answering, so the fault can be lifted.

Each costs one attribute check per query while none is active.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from ..broker.faults import Fault, FaultList

__all__ = ["HIDE_PRODUCERS", "LOOKUPD_DOWN", "LookupdFaults"]

HIDE_PRODUCERS = "hide_producers"
LOOKUPD_DOWN = "lookupd_down"


class LookupdFaults(FaultList):
    """The faults of one nsqlookupd (its clock is the server's)."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        #: Whether a producers fault is held (the query path's one check).
        self.hiding = False
        #: Whether a down fault is held (the HTTP routes' one check).
        self.down = False
        self._up = trio.Event()

    def hide_producers(self, topic: str | None = None, *, duration: float | None = None) -> Fault:
        """``/lookup`` lists no producers for ``topic`` (every topic without one)."""
        return self._add(HIDE_PRODUCERS, duration=duration, topic=topic)

    def lookupd_down(self, *, duration: float | None = None) -> Fault:
        """The HTTP API stops answering until lifted, or for ``duration`` seconds."""
        return self._add(LOOKUPD_DOWN, duration=duration)

    def hides(self, topic: str) -> bool:
        """Whether ``/lookup?topic=<topic>`` lists no producers now."""
        return any(f.kind == HIDE_PRODUCERS and f.topic in (None, topic) for f in self.active())

    async def wait_up(self) -> None:
        """Return once no down fault is in force (at once while none is)."""
        while self.down:
            ends = [f.until for f in self.active() if f.kind == LOOKUPD_DOWN]
            if not ends:
                return
            until = math.inf if None in ends else max(e for e in ends if e is not None)
            with trio.move_on_after(max(until - self._now(), 0.0)):
                await self._up.wait()

    def _changed(self) -> None:
        kinds = self.kinds()
        self.hiding = HIDE_PRODUCERS in kinds
        self.down = LOOKUPD_DOWN in kinds
        # the waiting requests look again: answered if none is left, or they wait on
        # until the ends of those that are
        self._up.set()
        self._up = trio.Event()
