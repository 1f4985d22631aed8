"""Faults on demand: one nsqd misbehaving on purpose, for tests (issue #18).

:class:`NodeFaults` holds the active faults of one :class:`~.nsqd.NSQD` and acts
the one-shot ones. Lasting faults (failed publishes, a full disk, latency, a
stall) are listed with :meth:`NodeFaults.active` and lifted with
:meth:`NodeFaults.lift` or :meth:`NodeFaults.lift_all`; they end by themselves
after ``count`` commands (writes, connections) or ``duration`` seconds when
given. One-shot faults (time out what is in flight, drop connections) act at
once and leave nothing behind.

The hot path pays one attribute check per publish command: the node's
``publish_fault`` is None unless a publish fault is active; and one per write
of a connection's writer: its ``gate`` is None unless latency or a stall is
active (:mod:`.write_faults`). A failed publish is
what nsqd answers when its topic's put fails: ``E_PUB_FAILED PUB failed <error>``
(``E_MPUB_FAILED``, ``E_DPUB_FAILED``; fatal, the connection closes) over TCP,
``503 EXITING`` over HTTP. A full disk also makes ``/ping`` answer
``500 NOK - <error>``, as a failed disk write does.

This module knows its node only as a :class:`FaultTarget`; it imports no server.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from ...broker.faults import MAX_FAULT_SECONDS, ClientScope, Fault, FaultList, check_scope
from .write_faults import WriteGates

if TYPE_CHECKING:
    from .channel import Channel
    from .options import NSQDOptions

__all__ = [
    "DISK_FULL_ERROR",
    "PUBLISH_FAILED_ERROR",
    "Fault",
    "FaultTarget",
    "NodeFaults",
]

#: The error a failed publish reports unless the test names one.
PUBLISH_FAILED_ERROR = "fault injected: publish failed"
#: The error a full disk reports unless the test names one (what the OS says).
DISK_FULL_ERROR = "write: no space left on device"

FAIL_PUBLISHES = "fail_publishes"
DISK_FULL = "disk_full"
LATENCY = "latency"
STALL = "stall"
#: Faults that fail publish commands.
PUBLISH_KINDS = frozenset({FAIL_PUBLISHES, DISK_FULL})
#: Faults that hold a connection's writer (:mod:`.write_faults`).
WRITE_KINDS = frozenset({LATENCY, STALL})


class FaultTarget(Protocol):
    """What the faults need of their nsqd."""

    publish_fault: Callable[[str], str | None] | None
    clients: dict[int, Any]
    random: Random

    @property
    def options(self) -> NSQDOptions:
        """The node's options (max-msg-timeout)."""
        ...

    def now(self) -> float:
        """The server clock, in seconds."""
        ...

    def channels(self) -> list[Channel]:
        """Every channel of every topic."""
        ...


class NodeFaults(FaultList):
    """The faults of one nsqd: lasting ones listed and liftable, one-shot ones acted."""

    def __init__(self, target: FaultTarget) -> None:
        self._target = target
        #: Latency and stalls: the gates of the connections' writers.
        self.gates = WriteGates(self, target)
        super().__init__(target.now)

    # -- lasting faults --------------------------------------------------------
    def fail_publishes(
        self,
        topic: str | None = None,
        *,
        count: int | None = None,
        duration: float | None = None,
        error: str = PUBLISH_FAILED_ERROR,
        kind: str = FAIL_PUBLISHES,
    ) -> Fault:
        """Fail the next ``count`` publish commands (or all, for ``duration`` seconds)."""
        return self._add(kind, count=count, duration=duration, topic=topic, error=error)

    def disk_full(
        self,
        topic: str | None = None,
        *,
        duration: float | None = None,
        error: str = DISK_FULL_ERROR,
    ) -> Fault:
        """Publishes fail with ``error`` and ``/ping`` answers ``NOK - <error>``."""
        return self.fail_publishes(topic, duration=duration, error=error, kind=DISK_FULL)

    def latency(self, delay: float, *, jitter: float = 0.0, **scope: Unpack[ClientScope]) -> Fault:
        """Every write to a matching client (responses, deliveries, heartbeats) waits
        ``delay`` seconds, plus or minus up to ``jitter``: the next ``count`` writes, or
        for ``duration`` seconds, or until lifted. A client matches when it is
        subscribed to ``topic`` (and ``channel``), its user agent contains
        ``user_agent`` and its IDENTIFY ``client_id`` is ``client_id``, as given
        (:class:`~nsqbox.broker.faults.ClientScope`); every client by default."""
        if not (0 <= jitter <= delay <= MAX_FAULT_SECONDS):
            raise ValueError("delay must be 0 to a day, and jitter between 0 and delay")
        check_scope(scope)
        return self._add(LATENCY, delay=delay, jitter=jitter, **scope)

    def stall(self, **scope: Unpack[ClientScope]) -> Fault:
        """Send nothing more to matching clients (matched as by :meth:`latency`), not
        even heartbeats, until lifted or ``duration`` seconds are up; with ``count``,
        only the first ``count`` connections it catches. Their read timeouts fire."""
        check_scope(scope)
        return self._add(STALL, **scope)

    @property
    def disk_error(self) -> str | None:
        """The error of the active full disk, if any (health reads it)."""
        for fault in self.active():
            if fault.kind == DISK_FULL:
                return fault.error
        return None

    def write_faults(self) -> list[Fault]:
        """The latency and stalls in force, oldest first."""
        return [f for f in self.active() if f.kind in WRITE_KINDS]

    def _changed(self) -> None:
        """Arm or disarm the hot path's checks for what is in force now."""
        kinds = self.kinds()
        self._target.publish_fault = self._check_publish if kinds & PUBLISH_KINDS else None
        self.gates.arm(bool(kinds & WRITE_KINDS))

    def _ended(self, fault: Fault) -> None:
        self.gates.ended(fault)

    def _check_publish(self, topic: str) -> str | None:
        """The error a publish to ``topic`` fails with, or None (counts the command)."""
        for fault in self.active():
            if fault.kind not in PUBLISH_KINDS:
                continue
            if fault.topic is not None and fault.topic != topic:
                continue
            self.use(fault)
            return fault.error
        return None

    # -- one-shot faults -------------------------------------------------------
    def time_out_in_flight(self, topic: str | None = None, channel: str | None = None) -> int:
        """Time out every in-flight message (of a topic or channel) now; how many.

        The channel's own timeout processing runs with a deadline past every
        message's: each is requeued as a msg-timeout would (counted in
        ``timeout_count``; its next delivery has attempts + 1).
        """
        target = self._target
        now = target.now()
        cutoff = now + target.options.max_msg_timeout + 1.0
        total = 0
        for ch in target.channels():
            if topic is not None and ch.topic_name != topic:
                continue
            if channel is not None and ch.name != channel:
                continue
            total += ch.in_flight_count()
            ch.process_in_flight(now, cutoff=cutoff)
        return total

    def drop_connections(
        self,
        topic: str | None = None,
        channel: str | None = None,
        *,
        user_agent: str | None = None,
        reset: bool = False,
    ) -> int:
        """Close client connections (those subscribed to ``topic``/``channel``, or
        whose user agent contains ``user_agent``; all by default); how many.

        A clean close by default; ``reset=True`` sends an RST (SO_LINGER 0).
        """
        dropped = 0
        for client in list(self._target.clients.values()):
            sub = client.channel
            if topic is not None and (sub is None or sub.topic_name != topic):
                continue
            if channel is not None and (sub is None or sub.name != channel):
                continue
            if user_agent is not None and user_agent not in client.user_agent:
                continue
            if reset:
                client.conn.reset()
            else:
                client.conn.close()
            dropped += 1
        return dropped
