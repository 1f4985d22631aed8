"""Broker time: the clock a box's nsqds and nsqlookupd read (issue #24, "Time control").

Every node reads broker time through one :class:`BrokerClock`. A box makes one and
gives it to each of its servers, so they share it; two boxes never share one.

- The real clock (the default) is real time at no cost: :attr:`BrokerClock.now` *is*
  the monotonic function it was made with (``trio.current_time`` in a server) and
  :attr:`BrokerClock.wall_ns` *is* ``time.time_ns``, so the hot path calls exactly
  what it called before there was a clock.
- A manual clock stands still: broker time is the time the clock was made plus an
  offset that only :meth:`BrokerClock.advance` moves, so no deferred message, REQ
  delay, msg-timeout or tombstone falls due on its own, however long a test takes
  (as trio's ``MockClock`` at rate 0, freezegun, or Pub/Sub's fake clock: time moves
  only when told). :meth:`~BrokerClock.advance` steps the offset from deadline to
  deadline: at each step every node runs its timeout processing (in-flight
  timeouts, deferred messages, REQ delays), so what falls due inside the span fires
  in deadline order, as it would have in real time. Consumers cannot answer inside
  a jump, so a message delivered by one of its steps starts its msg-timeout when the
  jump ends: a jump never times out what a live consumer would have finished. The
  call returns once the nodes settled: the deliveries are handed to the consumers'
  sockets.

What stays on real time, whatever the clock: heartbeats, read and write deadlines
and client liveness (moving them would disconnect every client on a long jump),
TLS, and the auth server's TTLs (a credential's lifetime is the auth server's).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from typing import Protocol

import trio

from ..go.syntax import parse_duration, parse_float

__all__ = [
    "CLOCK_MODES",
    "MAX_ADVANCE",
    "MAX_OFFSET",
    "BrokerClock",
    "ClockError",
    "ClockLimitError",
    "TimerNode",
    "parse_span",
]

#: The clock modes: ``real`` (the default) and ``manual``.
CLOCK_MODES = ("real", "manual")
#: The longest single advance (a year): a longer jump is a mistake, not a test.
MAX_ADVANCE = 366 * 24 * 3600.0
#: The furthest broker time may run ahead of its start, all advances together (ten
#: years). Every nanosecond timestamp a node writes (broker time, plus a DPUB's or
#: REQ's delay and a message timeout, each at most days) stays centuries inside the
#: int64 the message encoding holds (it ends in 2262): no message becomes unencodable.
MAX_OFFSET = 10 * MAX_ADVANCE
#: How far past the end of an advance a deadline may lie and still fire in it (float
#: rounding of broker time, never a real difference).
SLACK = 1e-6


class ClockError(RuntimeError):
    """The clock cannot do that: it is real time, not manual."""


class ClockLimitError(ValueError):
    """The advance would take broker time more than :data:`MAX_OFFSET` past its start."""


def parse_span(text: str | float | int) -> float:
    """Seconds from a number, a number as text (``"90"``, ``"1.5"``) or a Go duration
    (``"1h"``, ``"1m30s"``); ValueError unless finite, above 0 and at most a year."""
    if isinstance(text, bool):
        raise ValueError(f"not a span of time: {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        raw = text.strip()
        try:
            # Go's syntax, ASCII only: float() also takes '١٢', '1_0' and 'infinity'
            seconds = parse_float(raw) if len(raw) <= 32 else math.nan
        except ValueError:
            seconds = parse_duration(raw)
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_ADVANCE:
        raise ValueError(f"a span of time must be above 0 and at most a year, not {text!r}")
    return seconds


class TimerNode(Protocol):
    """A node whose timers a manual clock runs (an nsqd: its channels' timeouts)."""

    def next_due(self) -> tuple[float, float] | None:
        """The earliest deadline it holds and when its timers release it (broker
        seconds: they may round up), None when it holds none."""
        ...

    def fire(self, now: float, resume: float | None = None) -> int:
        """Process everything due by ``now``; how many messages fired. With ``resume``,
        what this delivered is in flight from ``resume`` on (the end of the jump)."""
        ...

    async def settle(self) -> None:
        """Wait until what it delivered is handed to its consumers' sockets."""
        ...


class BrokerClock:
    """One box's broker time (see the module doc). ``real`` is the monotonic clock the
    servers run on (``trio.current_time``); ``manual`` makes it movable."""

    def __init__(self, *, manual: bool = False, real: Callable[[], float] = time.monotonic) -> None:
        self.manual = manual
        self.real = real
        #: Seconds broker time is ahead of where the clock started (only :meth:`advance`
        #: moves it; a manual clock stands still otherwise).
        self.offset = 0.0
        #: Where a manual clock stands at offset 0: the monotonic and the wall time it was made.
        self._base = real()
        self._wall_base_ns = time.time_ns()
        #: Names the clock: nodes that answer the same id share it (the admin advances once).
        self.id = uuid.uuid4().hex[:16]
        #: The nodes whose timers an advance runs (nsqds add and remove themselves).
        self.nodes: list[TimerNode] = []
        #: One advance at a time (a test's and an admin request's, say).
        self._advancing = trio.Lock()
        self.now: Callable[[], float]
        self.wall_ns: Callable[[], int]
        if manual:
            self.now = self._manual_now
            self.wall_ns = self._manual_wall_ns
        else:
            self.now = real
            self.wall_ns = time.time_ns

    @classmethod
    def of_mode(cls, mode: str, real: Callable[[], float] = time.monotonic) -> BrokerClock:
        """A clock for ``mode`` (``real`` or ``manual``); ValueError for another."""
        if mode not in CLOCK_MODES:
            raise ValueError(f"the clock is real or manual, not {mode!r}")
        return cls(manual=mode == "manual", real=real)

    def _manual_now(self) -> float:
        return self._base + self.offset

    def _manual_wall_ns(self) -> int:
        return self._wall_base_ns + int(self.offset * 1e9)

    @property
    def mode(self) -> str:
        """``"real"`` or ``"manual"``."""
        return "manual" if self.manual else "real"

    def wall(self) -> float:
        """Broker time as seconds since the epoch (``time.time()``; on a manual clock, the
        wall time it was made plus the offset)."""
        return self.wall_ns() / 1e9

    def describe(self) -> dict[str, object]:
        """``{"id", "mode", "now", "offset"}``: the clock as the HTTP routes report it."""
        return {"id": self.id, "mode": self.mode, "now": self.wall(), "offset": self.offset}

    def attach(self, node: TimerNode) -> None:
        """Run ``node``'s timers on :meth:`advance` (a node starting)."""
        self.nodes.append(node)

    def detach(self, node: TimerNode) -> None:
        """Stop running ``node``'s timers (a node stopping)."""
        if node in self.nodes:
            self.nodes.remove(node)

    async def advance(self, seconds: float) -> int:
        """Move broker time ``seconds`` ahead; what fell due inside fired, in deadline order.

        Each step moves the clock to the next deadline (of any node) and runs every
        node's timeout processing there. What a step delivers counts as delivered when
        the jump ends (its msg-timeout starts then): consumers cannot answer inside a
        jump. Returns, once the deliveries are handed to the consumers' sockets, how
        many messages fired (timed out, or came out of deferral or a REQ delay).
        Raises :class:`ClockError` on the real clock, ValueError for a bad span and
        :class:`ClockLimitError` (a ValueError) when the offset would pass :data:`MAX_OFFSET`.
        """
        if not self.manual:
            raise ClockError(
                "the clock is real time: start the box with a manual clock "
                "(nsqbox up --clock manual, or the fixture option clock='manual')"
            )
        seconds = parse_span(seconds)
        async with self._advancing:
            self.check_room(seconds)
            return await self._advance(seconds)

    def check_room(self, seconds: float) -> None:
        """ClockLimitError unless the offset after ``seconds`` more is within :data:`MAX_OFFSET`."""
        if self.offset + seconds > MAX_OFFSET:
            room = max(MAX_OFFSET - self.offset, 0.0)
            raise ClockLimitError(
                f"broker time may be moved at most {MAX_OFFSET:.0f}s (ten years) in all: "
                f"{room:.0f}s left, not {seconds:g}s"
            )

    async def _advance(self, seconds: float) -> int:
        target = self.offset + seconds  # the offset at the end
        fired = 0
        while True:
            due = self._next_due()
            end = self._base + target
            # a deadline made as (base + offset) + timeout may round an ulp past the end
            # made as base + (offset + timeout): a microsecond of slack is far below the
            # timers' 10 ms buckets
            if due is None or due[0] > end + SLACK:
                break
            # Step to the deadline's release (the end of its timer bucket), but never past
            # the end of the span: what that bucket holds fires at its release either way.
            self.offset = max(self.offset, min(due[1] - self._base, target))
            release = max(due[1], self.now())
            fired += sum(node.fire(release, end) for node in self.nodes)
        self.offset = max(self.offset, target)
        now = self.now()
        fired += sum(node.fire(now) for node in self.nodes)  # due by the final time
        for node in list(self.nodes):
            await node.settle()
        return fired

    def _next_due(self) -> tuple[float, float] | None:
        due = [d for d in (node.next_due() for node in self.nodes) if d is not None]
        return min(due) if due else None
