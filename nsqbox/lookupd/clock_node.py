"""An nsqlookupd under a manual broker clock: :class:`LookupdTimers` (issue #24).

Tombstones and the inactive-producer timeout are measured on broker time
(:attr:`~.core.NSQLookupd.clock`), so a jump ages them. The pings that keep a
producer active are real-time liveness, though: an nsqd still connected would
have pinged all through the time skipped, so at the end of a jump every connected
producer counts as having just pinged. A jump alone never drops a live producer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .core import NSQLookupd

__all__ = ["LookupdTimers"]


class LookupdTimers:
    """The :class:`~nsqbox.clock.TimerNode` of one nsqlookupd: no timers, just pings."""

    def __init__(self, lookupd: NSQLookupd) -> None:
        self.lookupd = lookupd

    def next_due(self) -> tuple[float, float] | None:
        """None: nothing of nsqlookupd's fires at a deadline (its checks are lazy)."""
        return None

    def fire(self, now: float, resume: float | None = None) -> int:
        """At the end of a jump (no ``resume``): the connected producers pinged ``now``."""
        if resume is None:
            for _, producers in self.lookupd.db:
                for producer in producers:
                    producer.peer.last_update = max(producer.peer.last_update, now)
        return 0

    async def settle(self) -> None:
        """Nothing to hand to anyone."""
