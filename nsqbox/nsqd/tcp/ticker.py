"""One connection's heartbeats and its read and write timeouts, in one sleeping task.

Timeouts cost nothing per read or write: the ticker sleeps until the next heartbeat,
read deadline (twice the heartbeat interval of a reader waiting for bytes, as nsqd's
``SetReadDeadline``) or write deadline (one interval of a send in progress), whichever
comes first, and acts on the one that passed. A cancel scope per receive and per send
cost more than the receive itself.

It runs on real time (trio's clock), never the broker's: a manual clock's jump must
not time clients out.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

__all__ = ["Ticker"]


class Ticker:
    """The deadlines of one connection (see the module doc).

    ``reading_since`` says when the reader began waiting for bytes (None: it is not
    waiting); ``heartbeat`` is called when one is due (:attr:`heartbeat_due` is then
    set: the writer sends it and clears it); ``read_timeout`` and ``write_timeout``
    when that deadline passed, after which the ticker ends.
    """

    __slots__ = (
        "_heartbeat",
        "_next_heartbeat",
        "_read_timeout",
        "_reading_since",
        "_scope",
        "_stopped",
        "_write_timeout",
        "heartbeat_due",
        "interval",
        "sending_since",
    )

    def __init__(
        self,
        interval: float,
        *,
        reading_since: Callable[[], float | None],
        heartbeat: Callable[[], None],
        read_timeout: Callable[[], None],
        write_timeout: Callable[[], None],
    ) -> None:
        #: Seconds between heartbeats (0 or less: none, and no timeouts).
        self.interval = interval
        #: A heartbeat is due: the writer sends it.
        self.heartbeat_due = False
        #: When the writer's current send began (None: it is not sending).
        self.sending_since: float | None = None
        self._reading_since = reading_since
        self._heartbeat = heartbeat
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._next_heartbeat = 0.0
        #: The ticker's sleep: cancelled when a deadline may have moved earlier.
        self._scope = trio.CancelScope()
        self._stopped = False

    def restart(self) -> None:
        """Count the next heartbeat from now (nsqd restarts its ticker on IDENTIFY)."""
        self._next_heartbeat = trio.current_time() + self.interval
        self.heartbeat_due = False
        self._scope.cancel()  # the interval may have changed: the ticker looks again

    def stop(self) -> None:
        """Nothing left to time: :meth:`run` returns."""
        self._stopped = True
        self._scope.cancel()

    async def run(self) -> None:
        """Sleep to the next deadline and act on it, until stopped or a timeout."""
        clock = trio.current_time
        while not self._stopped:
            hb = self.interval
            wake_at = math.inf
            if hb > 0:
                wake_at = self._next_heartbeat
                receiving_since = self._reading_since()
                if receiving_since is not None:
                    wake_at = min(wake_at, receiving_since + 2 * hb)
                if self.sending_since is not None:
                    wake_at = min(wake_at, self.sending_since + hb)
            self._scope = trio.CancelScope(deadline=wake_at)
            with self._scope:
                await trio.sleep_forever()
            if hb <= 0 or hb != self.interval or self._stopped:
                continue  # IDENTIFY changed the interval: every deadline is counted anew
            now = clock()
            sending_since = self.sending_since
            if sending_since is not None and now >= sending_since + hb:
                self._write_timeout()
                return
            if now >= self._next_heartbeat:
                self.heartbeat_due = True
                self._next_heartbeat += hb
                self._heartbeat()
            receiving_since = self._reading_since()
            if receiving_since is not None and now >= receiving_since + 2 * hb:
                # the writer flushes (a heartbeat due now too) and ends
                self._read_timeout()
                return
