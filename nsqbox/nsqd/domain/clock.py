"""An nsqd's timers, as a manual broker clock runs them (:class:`NodeTimers`, issue #24).

:meth:`nsqbox.broker.clock.BrokerClock.advance` asks every node of its box for its next
deadline, steps the clock there and lets the node fire what is due: here, each
channel's own timeout processing (the queue scan's ``process_in_flight`` and
``process_deferred``), so a timeout counts in ``timeout_count`` and its next
delivery has attempts + 1, exactly as the periodic scan does it. Nothing here runs
unless a test moves the clock.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .timeout_queue import RESOLUTION, TimeoutQueue

if TYPE_CHECKING:
    from .nsqd import NSQD

__all__ = ["SETTLE_TIMEOUT", "NodeTimers", "delivered_at", "release_time"]

#: The longest a settle waits for one connection's output to reach its socket (a
#: consumer that stopped reading never gets it: the advance does not wait for it).
SETTLE_TIMEOUT = 2.0


class _Output(Protocol):
    out_limit: int

    def out_room(self) -> int: ...


def release_time(deadline: float) -> float:
    """When a timeout queue releases a message due at ``deadline``: the end of its
    10 ms bucket (:mod:`.timeout_queue` pops whole buckets once they ended)."""
    key = int(deadline / RESOLUTION) + 1
    at = key * RESOLUTION
    while int(at / RESOLUTION) < key:
        at = math.nextafter(at, math.inf)
    return at


class NodeTimers:
    """The :class:`~nsqbox.broker.clock.TimerNode` of one nsqd."""

    def __init__(self, nsqd: NSQD) -> None:
        self.nsqd = nsqd

    def ports(self) -> tuple[int, int]:
        """The nsqd's TCP and HTTP ports (how its nsqlookupd knows it as a live producer)."""
        return self.nsqd.tcp_port, self.nsqd.http_port

    def next_due(self) -> tuple[float, float] | None:
        """The earliest in-flight or deferred deadline of any channel, and its release."""
        deadlines = [
            d
            for channel in self.nsqd.channels()
            for d in (channel.in_flight.earliest(), channel.deferred.earliest())
            if d is not None
        ]
        if not deadlines:
            return None
        first = min(deadlines)
        return first, release_time(first)

    def fire(self, now: float, resume: float | None = None) -> int:
        """Time out and undefer what is due by ``now`` in every channel; how many.

        With ``resume`` (the broker time a jump ends at), what this delivered is in
        flight from then on: its msg-timeout starts when the consumer can answer (also
        when ``now``, the end of a timer bucket, lies a few ms past the jump's end).
        """
        fired = 0
        for channel in self.nsqd.channels():
            timeouts, deferred = channel.timeout_count, len(channel.deferred)
            channel.process_in_flight(now)
            channel.process_deferred(now)
            fired += channel.timeout_count - timeouts + deferred - len(channel.deferred)
            if resume is not None and resume != now:
                delivered_at(channel.in_flight, now, resume)
        return fired

    async def settle(self) -> None:
        """Wait until every client's buffered output is handed to its socket."""
        for client in list(self.nsqd.clients.values()):
            conn: Any = getattr(client, "conn", None)
            if conn is not None:
                await _flushed(conn)


def delivered_at(in_flight: TimeoutQueue, now: float, resume: float) -> None:
    """Move the messages delivered at ``now`` to a delivery at ``resume``."""
    for msg in [m for m in in_flight if m.delivery_ts == now]:
        msg_id = msg.data[:16]
        client_id, delivered, deadline = msg.lease
        in_flight.remove(msg_id, msg)
        msg.lease = (client_id, resume, resume + deadline - delivered)
        in_flight.add(msg_id, msg, msg.lease[2])


async def _flushed(conn: _Output) -> None:
    with trio.move_on_after(SETTLE_TIMEOUT):
        delay = 0.0
        while conn.out_room() < conn.out_limit:
            await trio.sleep(delay)
            delay = min(max(delay * 2, 0.001), 0.02)
