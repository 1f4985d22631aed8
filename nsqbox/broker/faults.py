"""The lasting faults a server has in force: :class:`Fault` and :class:`FaultList` (issue #18).

nsqd's faults (:mod:`nsqbox.nsqd.domain.faults`) and nsqlookupd's
(:mod:`nsqbox.lookupd.faults`) keep theirs the same way: numbered, listed
oldest first, each lifted by id, or all at once, or by itself after ``count``
uses or ``duration`` seconds on the server's clock. Both list them with the
same JSON fields (:meth:`Fault.describe`), so one client reads both.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

__all__ = [
    "MAX_FAULTS",
    "MAX_FAULT_SECONDS",
    "ClientScope",
    "Fault",
    "FaultLimitError",
    "FaultList",
    "check_limits",
    "check_scope",
    "left_text",
]

#: The longest a fault lasts, and the longest delay it adds (a day): longer is a mistake,
#: and ``duration=1e300`` gave an end date no view could show.
MAX_FAULT_SECONDS = 24 * 3600.0
#: The most faults one server holds in force at once (each costs every publish or write
#: a check): the next one is refused until one ends.
MAX_FAULTS = 64

#: Fault ids, unique in the process: a server started again (a restart) never gives
#: a new fault the id of one a test still holds for its old self.
_IDS = itertools.count(1)


@dataclass
class Fault:
    """One lasting fault: what it does, where, since when and until when."""

    id: int
    kind: str
    topic: str | None = None
    #: What a failed command reports (publish faults; empty for the others).
    error: str = ""
    #: Uses left: publish commands it fails, writes it delays, connections it may
    #: stall (None: no limit).
    remaining: int | None = None
    #: When it ends, on the server clock (None: when lifted).
    until: float | None = None
    #: When it began (wall clock, seconds since the epoch).
    since: float = field(default_factory=time.time)
    #: Latency and stalls: the channel, and the clients (user agent containing
    #: ``user_agent``; IDENTIFY's ``client_id``) they hold.
    channel: str | None = None
    user_agent: str | None = None
    client_id: str | None = None
    #: Latency: seconds each write waits, plus or minus up to ``jitter``.
    delay: float | None = None
    jitter: float | None = None
    #: When it ends, on the wall clock (seconds since the epoch; None: when lifted).
    wall_until: float | None = None
    #: The server clock ``until`` is on (for the seconds left).
    clock: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    def left(self) -> float | None:
        """Seconds until it ends (None: it lasts until lifted or used up)."""
        if self.until is None or self.clock is None:
            return None
        return round(max(self.until - self.clock(), 0.0), 3)

    def describe(self) -> dict[str, object]:
        """A JSON-ready description (what ``GET /nsqbox/faults`` lists): ``until`` is when a
        fault with a duration ends (epoch seconds) and ``left`` the seconds to then (both
        None without a duration); ``remaining`` the uses left (None: no count)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "topic": self.topic,
            "error": self.error,
            "remaining": self.remaining,
            "since": self.since,
            "until": self.wall_until,
            "left": self.left(),
            "channel": self.channel,
            "user_agent": self.user_agent,
            "client_id": self.client_id,
            "delay": self.delay,
            "jitter": self.jitter,
        }


#: What a fault's ``remaining`` counts, by kind (commands for the others: publishes).
COUNTED = {"latency": "write", "stall": "connection"}


def _seconds_text(seconds: float) -> str:
    """``12s``, ``2m05s``, ``1h02m``: whole seconds, rounded up."""
    whole = math.ceil(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole // 60 % 60:02d}m"


def left_text(fault: Mapping[str, object]) -> str:
    """How long a listed fault (:meth:`Fault.describe`) lasts: ``12s``, ``1 command``,
    ``3 connections``, ``2 writes or 30s``, or ``until lifted``."""
    parts = []
    remaining, left = fault.get("remaining"), fault.get("left")
    if isinstance(remaining, int):
        unit = COUNTED.get(str(fault.get("kind")), "command")
        parts.append(f"{remaining} {unit}{'' if remaining == 1 else 's'}")
    if isinstance(left, int | float):
        parts.append(_seconds_text(left))
    return " or ".join(parts) or "until lifted"


class FaultLimitError(ValueError):
    """The server holds :data:`MAX_FAULTS` faults already: lift one first."""


def check_limits(count: int | None, duration: float | None) -> None:
    """ValueError unless ``count`` is at least 1 and ``duration`` positive and at most
    :data:`MAX_FAULT_SECONDS` (or None)."""
    if count is not None and count < 1:
        raise ValueError("count must be at least 1")
    if duration is not None and not (0 < duration <= MAX_FAULT_SECONDS):
        raise ValueError(f"duration must be positive and at most {MAX_FAULT_SECONDS:.0f}s")


class ClientScope(TypedDict, total=False):
    """Which clients latency or a stall holds, and for how long (nsqd's and the test handle's
    keyword arguments). A client matches when it is subscribed to ``topic`` (and
    ``channel``), its user agent contains ``user_agent`` and its IDENTIFY ``client_id`` is
    ``client_id``, each if given; the fault ends after ``count`` uses or ``duration`` seconds.
    """

    topic: str | None
    channel: str | None
    user_agent: str | None
    client_id: str | None
    count: int | None
    duration: float | None


def check_scope(scope: ClientScope) -> None:
    """TypeError for a key :class:`ClientScope` lacks (as for an unknown keyword argument),
    ValueError for a bad ``count`` or ``duration`` (:func:`check_limits`)."""
    for key in sorted(scope.keys() - ClientScope.__optional_keys__):
        raise TypeError(f"unexpected keyword argument {key!r}")
    check_limits(scope.get("count"), scope.get("duration"))


class FaultList:
    """A server's lasting faults. Subclasses add the kinds and act on :meth:`_changed`."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._faults: dict[int, Fault] = {}

    def _add(
        self,
        kind: str,
        *,
        count: int | None = None,
        duration: float | None = None,
        topic: str | None = None,
        error: str = "",
        channel: str | None = None,
        user_agent: str | None = None,
        client_id: str | None = None,
        delay: float | None = None,
        jitter: float | None = None,
    ) -> Fault:
        """A new fault of ``kind``, in force until lifted, ``count`` uses or ``duration``;
        :class:`FaultLimitError` when :data:`MAX_FAULTS` are in force already."""
        check_limits(count, duration)
        if len(self._faults) >= MAX_FAULTS and len(self.active()) >= MAX_FAULTS:
            raise FaultLimitError(f"{MAX_FAULTS} faults are in force already: lift one first")
        until = None if duration is None else self._now() + duration
        fault = Fault(
            next(_IDS),
            kind,
            topic,
            error,
            count,
            until,
            channel=channel,
            user_agent=user_agent,
            client_id=client_id,
            delay=delay,
            jitter=jitter,
            clock=self._now,
        )
        if duration is not None:
            fault.wall_until = fault.since + duration
        self._faults[fault.id] = fault
        self._changed()
        return fault

    def active(self) -> list[Fault]:
        """The lasting faults now in force, oldest first."""
        now = self._now()
        for fault in list(self._faults.values()):
            if fault.until is not None and now >= fault.until:
                self.lift(fault.id)
        return list(self._faults.values())

    def lift(self, fault_id: int) -> bool:
        """End one fault; False when it had already ended."""
        fault = self._faults.pop(fault_id, None)
        if fault is None:
            return False
        self._changed()
        self._ended(fault)
        return True

    def lift_all(self) -> int:
        """End every lasting fault; how many there were."""
        live = self.active()
        for fault in live:
            self.lift(fault.id)
        return len(live)

    def use(self, fault: Fault) -> None:
        """Count one use of ``fault``; it ends with its last."""
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                self.lift(fault.id)

    def kinds(self) -> set[str]:
        """The kinds of the faults held (expired ones included until listed)."""
        return {fault.kind for fault in self._faults.values()}

    def _changed(self) -> None:
        """A fault was added or ended (subclasses arm or disarm their checks)."""

    def _ended(self, fault: Fault) -> None:
        """``fault`` ended (subclasses release what waits on it)."""
