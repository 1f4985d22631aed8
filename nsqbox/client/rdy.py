"""RDY state and backoff for one consumer, pure: no I/O, an injected clock and RNG.

This is the guide's "RDY State" and "Backoff" sections as a state machine. It
decides every ``RDY n`` the consumer sends and hands it to ``send_rdy(key, n)``;
the caller writes it to that connection. The caller reports what happens
(:meth:`RdyController.add`, :meth:`~RdyController.received`,
:meth:`~RdyController.finished`, :meth:`~RdyController.requeued`, ...) and
calls :meth:`~RdyController.backoff_expired` at :attr:`~RdyController.backoff_deadline`
and :meth:`~RdyController.redistribute` every redistribution interval.

The guide's rules, and where they live:

1. ``max_in_flight`` is spread evenly: ``max_in_flight // connections`` each
   (:meth:`per_connection`), and a new connection starts at ``RDY 1``.
2. The sum of RDY over all connections never exceeds ``max_in_flight``, and no
   connection's RDY exceeds its nsqd's ``max_rdy_count`` (:meth:`_update`).
3. RDY is re-sent when what is left of it falls to 25% of the last value sent
   (:meth:`_maybe_update`); harmless on today's nsqd, needed on old ones that
   counted RDY down.
4. With fewer ``max_in_flight`` than connections, RDY moves between connections
   by liveness (:meth:`redistribute`), so every nsqd is eventually drained.
5. Backoff: a failure sets every connection to ``RDY 0`` for the backoff
   duration, then one random connection gets ``RDY 1`` to test the waters;
   successes step back down, and level 0 returns to full throttle. Results that
   arrive while the backoff timer runs are ignored.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .backoff import BackoffTimer
from .handshake import DEFAULT_MAX_RDY_COUNT

__all__ = ["ConnRdy", "RdyController"]

#: The guide's starvation threshold: anticipate starvation rather than wait for it.
STARVED_RATIO = 0.85
#: When no connection can test the waters, look again after this long (as go-nsq).
NO_CONNECTION_RETRY = 1.0


class ConnRdy:
    """The RDY bookkeeping of one connection."""

    __slots__ = (
        "closed",
        "in_flight",
        "key",
        "last_message_at",
        "last_rdy_at",
        "max_rdy_count",
        "rdy",
        "remaining",
    )

    def __init__(self, key: str, max_rdy_count: int, now: float) -> None:
        self.key = key
        self.max_rdy_count = max_rdy_count
        #: The last RDY sent (what nsqd holds for this connection).
        self.rdy = 0
        #: Messages received since that RDY may still arrive before it is used up.
        self.remaining = 0
        self.in_flight = 0
        self.last_message_at = now
        #: When the connection went from RDY 0 to a positive count.
        self.last_rdy_at = now
        self.closed = False

    def __repr__(self) -> str:
        return f"ConnRdy({self.key!r}, rdy={self.rdy}, in_flight={self.in_flight})"


class RdyController:
    """Every RDY decision of one consumer (see the module docstring for the rules)."""

    def __init__(
        self,
        max_in_flight: int,
        send_rdy: Callable[[str, int], None],
        *,
        clock: Callable[[], float],
        backoff: BackoffTimer | None = None,
        rng: random.Random | None = None,
        low_rdy_idle_timeout: float = 10.0,
        low_rdy_timeout: float = 30.0,
        on_schedule: Callable[[], None] | None = None,
    ) -> None:
        self.max_in_flight = max_in_flight
        self.backoff = backoff if backoff is not None else BackoffTimer()
        self.low_rdy_idle_timeout = low_rdy_idle_timeout
        self.low_rdy_timeout = low_rdy_timeout
        #: Set when a redistribution round must run even outside its usual cases.
        self.need_redistribute = False
        self.conns: dict[str, ConnRdy] = {}
        self._send_rdy = send_rdy
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._on_schedule = on_schedule or (lambda: None)
        self._total = 0
        self._deadline: float | None = None

    # -- queries ---------------------------------------------------------------
    @property
    def total_rdy(self) -> int:
        """The sum of RDY over all connections."""
        return self._total

    @property
    def in_backoff(self) -> bool:
        """True from the first failure until successes bring the level back to 0."""
        return self.backoff.level > 0

    @property
    def backoff_deadline(self) -> float | None:
        """When the running backoff timer ends (None when none runs)."""
        return self._deadline

    def per_connection(self) -> int:
        """``max_in_flight`` spread evenly: at least 1, at most ``max_in_flight``."""
        if self.max_in_flight <= 0:
            return 0
        return min(max(1, self.max_in_flight // max(1, len(self.conns))), self.max_in_flight)

    def is_starved(self) -> bool:
        """The guide's test: some connection has at least 85% of its RDY in flight."""
        for conn in self.conns.values():
            if conn.in_flight > 0 and conn.in_flight >= conn.rdy * STARVED_RATIO:
                return True
        return False

    # -- connections -----------------------------------------------------------
    def add(self, key: str, max_rdy_count: int = DEFAULT_MAX_RDY_COUNT) -> ConnRdy:
        """A connection subscribed: make room for it, then start it at RDY 1."""
        conn = ConnRdy(key, max_rdy_count, self._clock())
        self.conns[key] = conn
        share = self.per_connection()
        for other in self.conns.values():
            if other.rdy > share:
                self._update(other, share)
        # The initial RDY 1 (guide, Connection Handling). During backoff only one
        # connection may test the waters, and none while the timer runs.
        if self._deadline is None and self.max_in_flight > 0:
            limit = 1 if self.in_backoff else self.max_in_flight
            if self._total < limit:
                self._update(conn, 1)
        return conn

    def remove(self, key: str) -> None:
        """A connection closed; its RDY is free again."""
        conn = self.conns.pop(key, None)
        if conn is None:
            return
        conn.closed = True
        self._total -= conn.rdy
        # Leaving the redistribution regime, or losing the connection that tests the
        # waters, must hand that RDY to another connection (go-nsq's onConnClose).
        if conn.rdy > 0 and (len(self.conns) == self.max_in_flight or self.in_backoff):
            self.need_redistribute = True
        conn.rdy = 0

    # -- message flow ----------------------------------------------------------
    def received(self, conn: ConnRdy) -> None:
        """A message arrived on ``conn``."""
        conn.in_flight += 1
        conn.remaining -= 1
        conn.last_message_at = self._clock()
        self._maybe_update(conn)

    def finished(self, conn: ConnRdy) -> None:
        """A message was finished: a success for backoff."""
        conn.in_flight = max(0, conn.in_flight - 1)
        self._backoff_result(success=True)

    def requeued(self, conn: ConnRdy, *, backoff: bool = True) -> None:
        """A message was requeued: a failure for backoff, or neutral with ``backoff=False``."""
        conn.in_flight = max(0, conn.in_flight - 1)
        self._backoff_result(success=False if backoff else None)

    def set_max_in_flight(self, max_in_flight: int) -> None:
        """Change ``max_in_flight`` at run time (0 pauses the consumer)."""
        if max_in_flight < 0:
            raise ValueError("max_in_flight must be >= 0")
        self.max_in_flight = max_in_flight
        share = self.per_connection()
        for conn in self.conns.values():
            if conn.rdy > share:
                self._update(conn, share)
        # With more connections than max_in_flight even shares of 1 can add up to
        # too much: take RDY back until the total fits, redistribution does the rest.
        for conn in reversed(self.conns.values()):
            excess = self._total - max_in_flight
            if excess <= 0:
                break
            self._update(conn, max(0, conn.rdy - excess))
        if max_in_flight == 0 or self._deadline is not None or self.in_backoff:
            return
        if len(self.conns) > max_in_flight:
            self.need_redistribute = True
            self.redistribute()
        else:
            for conn in self.conns.values():
                if conn.rdy < share:
                    self._update(conn, share)

    # -- timers ----------------------------------------------------------------
    def backoff_expired(self) -> None:
        """The backoff timer ran out: RDY 1 on one random connection to test the waters."""
        if self._deadline is None:
            return
        self._deadline = None
        if not self.in_backoff:
            self._leave_backoff()
            return
        if not self.conns:
            self._deadline = self._clock() + NO_CONNECTION_RETRY
            self._on_schedule()
            return
        conns = list(self.conns.values())
        self._update(conns[self._rng.randrange(len(conns))], 1)

    def redistribute(self) -> None:
        """Move RDY by liveness when not every connection can hold some (guide, RDY State).

        Runs when connections outnumber ``max_in_flight``, in backoff with several
        connections, or when :attr:`need_redistribute` is set. Connections that
        have had no message for ``low_rdy_idle_timeout``, or held their RDY for
        ``low_rdy_timeout``, give it up; then the free RDY goes, one at a time,
        to random connections with nothing in flight, preferring those that did
        not just give theirs up.
        """
        if self._deadline is not None or not self.conns or self.max_in_flight <= 0:
            return
        if len(self.conns) > self.max_in_flight or (self.in_backoff and len(self.conns) > 1):
            self.need_redistribute = True
        if not self.need_redistribute:
            return
        self.need_redistribute = False
        now = self._clock()
        gave_up = []
        for conn in self.conns.values():
            if conn.rdy > 0 and (
                now - conn.last_message_at > self.low_rdy_idle_timeout
                or now - conn.last_rdy_at > self.low_rdy_timeout
            ):
                self._update(conn, 0)
                gave_up.append(conn)
        limit = 1 if self.in_backoff else self.max_in_flight
        # Messages still in flight count too, so moving RDY never lets more than
        # max_in_flight messages be outstanding at once.
        committed = sum(max(conn.rdy, conn.in_flight) for conn in self.conns.values())
        available = limit - committed
        idle = [c for c in self.conns.values() if c.rdy == 0 and c.in_flight == 0]
        candidates = [c for c in idle if c not in gave_up] or idle
        while available > 0 and candidates:
            conn = candidates.pop(self._rng.randrange(len(candidates)))
            if self._update(conn, 1):
                available -= 1

    # -- internals ---------------------------------------------------------------
    def _maybe_update(self, conn: ConnRdy) -> None:
        # Outside backoff, bring a connection to its share (after RDY 1, or when the
        # number of connections changed), and refresh it when 75% of it is used.
        if self._deadline is not None or self.in_backoff or self.max_in_flight <= 0:
            return
        share = self.per_connection()
        if conn.rdy != share or conn.remaining * 4 <= conn.rdy:
            self._update(conn, share)

    def _backoff_result(self, success: bool | None) -> None:
        # go-nsq's startStopContinueBackoff, with the guide's rule that results
        # arriving while the backoff timer runs do not count.
        if not self.backoff.enabled or self._deadline is not None:
            return
        changed = False
        if success is True:
            changed = self.backoff.success()
        elif success is False:
            changed = self.backoff.failure()
        if self.backoff.level == 0:
            if changed:
                self._leave_backoff()
            return
        # In backoff: every result (success, failure, neutral) ends the test; stop
        # everything and wait for the current level's duration.
        for conn in self.conns.values():
            self._update(conn, 0)
        self._deadline = self._clock() + self.backoff.interval
        self._on_schedule()

    def _leave_backoff(self) -> None:
        if len(self.conns) > self.max_in_flight:
            self.need_redistribute = True
            self.redistribute()
            return
        share = self.per_connection()
        for conn in self.conns.values():
            self._update(conn, share)

    def _update(self, conn: ConnRdy, count: int) -> bool:
        """Send ``RDY count`` within the limits; False when no RDY could be given."""
        if conn.closed:
            return False
        count = min(count, conn.max_rdy_count)
        max_possible = self.max_in_flight - self._total + conn.rdy
        if count > 0 and count > max_possible:
            if max_possible <= 0:
                return False
            count = max_possible
        if count == 0 and conn.rdy == 0:
            return True  # nothing to take back
        if count > 0 and conn.rdy == 0:
            conn.last_rdy_at = self._clock()
        self._total += count - conn.rdy
        conn.rdy = count
        conn.remaining = count
        self._send_rdy(conn.key, count)
        return True
