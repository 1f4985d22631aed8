"""Faults on demand: one nsqd misbehaving on purpose, for tests (issue #18).

:class:`NodeFaults` holds the active faults of one :class:`~.nsqd.NSQD` and acts
the one-shot ones. Lasting faults (failed publishes, a full disk) are listed with
:meth:`NodeFaults.active` and lifted with :meth:`NodeFaults.lift` or
:meth:`NodeFaults.lift_all`; they end by themselves after ``count`` commands or
``duration`` seconds when given. One-shot faults (time out what is in flight,
drop connections) act at once and leave nothing behind.

The hot path pays one attribute check per publish command: the node's
``publish_fault`` is None unless a publish fault is active. A failed publish is
what nsqd answers when its topic's put fails: ``E_PUB_FAILED PUB failed <error>``
(``E_MPUB_FAILED``, ``E_DPUB_FAILED``; fatal, the connection closes) over TCP,
``503 EXITING`` over HTTP. A full disk also makes ``/ping`` answer
``500 NOK - <error>``, as a failed disk write does.

This module knows its node only as a :class:`FaultTarget`; it imports no server.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

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


class FaultTarget(Protocol):
    """What the faults need of their nsqd."""

    publish_fault: Callable[[str], str | None] | None
    clients: dict[int, Any]

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


@dataclass
class Fault:
    """One lasting fault: what it does, where, since when and until when."""

    id: int
    kind: str
    topic: str | None
    error: str
    #: Publish commands it still fails (None: no limit).
    remaining: int | None
    #: When it ends, on the server clock (None: when lifted).
    until: float | None
    #: When it began (wall clock, seconds since the epoch).
    since: float = field(default_factory=time.time)

    def describe(self) -> dict[str, object]:
        """A JSON-ready description (what ``active()`` lists)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "topic": self.topic,
            "error": self.error,
            "remaining": self.remaining,
            "since": self.since,
        }


class NodeFaults:
    """The faults of one nsqd: lasting ones listed and liftable, one-shot ones acted."""

    def __init__(self, target: FaultTarget) -> None:
        self._target = target
        self._ids = itertools.count(1)
        self._faults: dict[int, Fault] = {}

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
        if count is not None and count < 1:
            raise ValueError("count must be at least 1")
        if duration is not None and duration <= 0:
            raise ValueError("duration must be positive")
        until = None if duration is None else self._target.now() + duration
        fault = Fault(next(self._ids), kind, topic, error, count, until)
        self._faults[fault.id] = fault
        self._target.publish_fault = self._check_publish
        return fault

    def disk_full(
        self,
        topic: str | None = None,
        *,
        duration: float | None = None,
        error: str = DISK_FULL_ERROR,
    ) -> Fault:
        """Publishes fail with ``error`` and ``/ping`` answers ``NOK - <error>``."""
        return self.fail_publishes(topic, duration=duration, error=error, kind=DISK_FULL)

    @property
    def disk_error(self) -> str | None:
        """The error of the active full disk, if any (health reads it)."""
        for fault in self._live():
            if fault.kind == DISK_FULL:
                return fault.error
        return None

    def active(self) -> list[Fault]:
        """The lasting faults now in force, oldest first."""
        return self._live()

    def lift(self, fault_id: int) -> bool:
        """End one fault; False when it had already ended."""
        found = self._faults.pop(fault_id, None) is not None
        if not self._faults:
            self._target.publish_fault = None
        return found

    def lift_all(self) -> int:
        """End every lasting fault; how many there were."""
        count = len(self._live())
        self._faults.clear()
        self._target.publish_fault = None
        return count

    def _live(self) -> list[Fault]:
        now = self._target.now()
        for fault in list(self._faults.values()):
            if fault.until is not None and now >= fault.until:
                self.lift(fault.id)
        return list(self._faults.values())

    def _check_publish(self, topic: str) -> str | None:
        """The error a publish to ``topic`` fails with, or None (counts the command)."""
        for fault in self._live():
            if fault.topic is not None and fault.topic != topic:
                continue
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.lift(fault.id)
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
