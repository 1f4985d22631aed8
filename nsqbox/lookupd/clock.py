"""An nsqlookupd under a manual broker clock: :class:`LookupdTimers` (issue #24).

Tombstones and the inactive-producer timeout are measured on broker time
(:attr:`~.core.NSQLookupd.clock`), so a jump ages them. The pings that keep a
producer active are real-time liveness, though: the nsqds of the same box (they
share the clock, and run) would have pinged all through the time skipped, so at the
end of a jump they count as having just pinged. Any other producer ages: one that
stopped pinging goes inactive once the clock passes its inactive-producer timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..broker.clock import TimerNode
    from .core import NSQLookupd

__all__ = ["LookupdTimers"]


def _port_readers(nodes: Iterable[TimerNode]) -> list[Callable[[], tuple[int, int]]]:
    """The ``ports()`` of the nodes that are nsqds (their TCP and HTTP ports)."""
    readers = (getattr(node, "ports", None) for node in nodes)
    return [reader for reader in readers if callable(reader)]


class LookupdTimers:
    """The :class:`~nsqbox.broker.clock.TimerNode` of one nsqlookupd: no timers, just pings."""

    def __init__(self, lookupd: NSQLookupd) -> None:
        self.lookupd = lookupd

    def next_due(self) -> tuple[float, float] | None:
        """None: nothing of nsqlookupd's fires at a deadline (its checks are lazy)."""
        return None

    def fire(self, now: float, resume: float | None = None) -> int:
        """At the end of a jump (no ``resume``): the box's nsqds pinged ``now``."""
        if resume is None:
            box = {ports() for ports in _port_readers(self.lookupd.broker.nodes)}
            for _, producers in self.lookupd.db:
                for producer in producers:
                    peer = producer.peer
                    if (peer.tcp_port, peer.http_port) in box:
                        peer.last_update = max(peer.last_update, now)
        return 0

    async def settle(self) -> None:
        """Nothing to hand to anyone."""
