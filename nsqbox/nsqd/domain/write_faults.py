"""Latency and stalls: faults that hold a connection's writer (issue #18).

A :class:`~nsqbox.nsqd.tcp.connection.Connection` awaits its ``gate``, when it has one, before
each write (one ``send_all`` of everything buffered: responses, message
deliveries, heartbeats). :class:`WriteGates` gives every connection a gate while
a latency or stall fault is in force, and takes them away when the last one
ends, so without such a fault a writer pays one attribute check per write and
nothing per message.

- Latency: the write waits the fault's ``delay``, plus or minus up to ``jitter``
  (the node's own random numbers); what is buffered meanwhile goes with the next
  write, which waits again. A consumer gets everything, later.
- A stall: the write waits until the fault ends. Nothing reaches the client, not
  even heartbeats, so its read timeout fires and it closes the connection; when
  its reader sees that end, the connection cancels the gate and closes.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import partial
from random import Random
from typing import Any, Protocol

import trio

from ...broker.faults import Fault

__all__ = ["WriteGates", "holds"]

#: What a connection's writer awaits before a write.
Gate = Callable[[], Awaitable[None]]


class HeldFaults(Protocol):
    """The node's fault list, as the gates use it (:class:`~.faults.NodeFaults`)."""

    def write_faults(self) -> list[Fault]:
        """The latency and stalls in force, oldest first."""
        ...

    def use(self, fault: Fault) -> None:
        """Count one use of ``fault``."""
        ...


class GateTarget(Protocol):
    """What the gates need of their nsqd."""

    clients: dict[int, Any]
    random: Random

    def now(self) -> float:
        """The server clock, in seconds."""
        ...


def holds(fault: Fault, client: Any) -> bool:
    """Whether latency or a stall applies to ``client`` (a ClientState) now."""
    sub = client.channel
    if fault.topic is not None and (sub is None or sub.topic_name != fault.topic):
        return False
    if fault.channel is not None and (sub is None or sub.name != fault.channel):
        return False
    if fault.user_agent is not None and fault.user_agent not in client.user_agent:
        return False
    return fault.client_id is None or fault.client_id == client.client_id


class WriteGates:
    """The writers' gates of one nsqd's connections, for its latency and stall faults."""

    def __init__(self, faults: HeldFaults, target: GateTarget) -> None:
        self._faults = faults
        self._target = target
        self._armed = False
        #: Set when a stall ends: the writers it holds go on.
        self._ended: dict[int, trio.Event] = {}
        #: The client ids a stall with a ``count`` caught.
        self._caught: dict[int, set[int]] = {}

    def arm(self, on: bool) -> None:
        """Give every connection a gate (``on``), or take them all away."""
        if on == self._armed:
            return
        self._armed = on
        for client in list(self._target.clients.values()):
            client.conn.gate = self._gate(client) if on else None

    def attach(self, client: Any) -> None:
        """A new connection's client (a ClientState): gated while latency or a stall is in force."""
        if self._armed:
            client.conn.gate = self._gate(client)

    def ended(self, fault: Fault) -> None:
        """``fault`` was lifted (or ran out): the writers it holds go on."""
        event = self._ended.pop(fault.id, None)
        if event is not None:
            event.set()
        self._caught.pop(fault.id, None)

    def _gate(self, client: Any) -> Gate:
        return partial(self._before_write, client)

    async def _before_write(self, client: Any) -> None:
        """Wait as the faults that hold ``client`` say (nothing when none does)."""
        while True:
            fault = self._holding(client)
            if fault is None:
                return
            if fault.delay is None:  # a stall: until it ends
                event = self._ended.setdefault(fault.id, trio.Event())
                left = math.inf if fault.until is None else fault.until - self._target.now()
                with trio.move_on_after(max(left, 0.0)):
                    await event.wait()
                continue
            self._faults.use(fault)
            jitter = fault.jitter or 0.0
            delay = fault.delay + (self._target.random.uniform(-jitter, jitter) if jitter else 0)
            await trio.sleep(max(delay, 0.0))
            return

    def _holding(self, client: Any) -> Fault | None:
        """The first latency or stall in force that holds ``client``."""
        for fault in self._faults.write_faults():
            if not holds(fault, client):
                continue
            if fault.delay is None and fault.remaining is not None:
                caught = self._caught.setdefault(fault.id, set())
                if client.id not in caught:
                    if fault.remaining <= 0:
                        continue  # it caught its count of connections already
                    fault.remaining -= 1
                    caught.add(client.id)
            return fault
        return None
