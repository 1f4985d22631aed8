"""The test handle's broker clock: ``nsqbox.clock`` (docs/testing.md, "Testing time").

A box started with a manual clock (``nsqbox_factory(clock="manual")``, the
``nsqbox_clock`` option, ``nsqbox up --clock manual``) lets a test move broker time:
``advance("1h")`` fires every deferred message, REQ delay and in-flight timeout due
inside the span, in deadline order, and returns once the deliveries are on their
way to the consumers (see :meth:`nsqbox.broker.clock.BrokerClock.advance`). Each box has
its own clock: parallel boxes never see each other's time.

Thread mode reaches the box's :class:`~nsqbox.broker.clock.BrokerClock` on the servers'
loop, trio mode on the test's own (:class:`TrioClock`, whose ``advance`` is
awaited); subprocess and noproc modes go through the servers' ``/nsqbox/clock``
routes (:mod:`nsqbox.http.clock`), and against a real nsqd, which has none,
every call raises :class:`ClockUnsupported`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..broker.clock import BrokerClock, ClockError, parse_span
from .config import Address, BoxAddresses
from .remote import NSQHTTPError, http

if TYPE_CHECKING:
    from .boxes import Box, ThreadBox

__all__ = ["BoxClock", "Clock", "ClockError", "ClockUnsupported", "HTTPClock", "TrioClock"]

_ROUTES = "/nsqbox/clock"


class ClockUnsupported(NotImplementedError):
    """Moving time needs nsqbox's servers (the box's own, or their ``/nsqbox/clock`` routes)."""


class Clock:
    """Broker time of one box (``nsqbox.clock``): read it, and move a manual clock."""

    def now(self) -> float:
        """Broker time, in seconds since the epoch (``time.time()`` plus the offset)."""
        raise NotImplementedError

    @property
    def manual(self) -> bool:
        """Whether the box's clock is manual (only a manual clock moves)."""
        raise NotImplementedError

    def advance(self, by: float | str) -> float:
        """Move broker time ``by`` seconds (or a Go duration: ``"1h"``, ``"90s"``) ahead.

        Everything due inside the span fires in deadline order; returns broker time
        after, once the deliveries are handed to the consumers' sockets and the stats
        show them. :class:`~nsqbox.broker.clock.ClockError` on a real clock, ValueError for a
        bad span.
        """
        raise NotImplementedError


class BoxClock(Clock):
    """The clock of a box whose servers run in this process (thread mode)."""

    def __init__(self, box: ThreadBox) -> None:
        self._box = box

    @property
    def _clock(self) -> BrokerClock:
        clock: BrokerClock = self._box.cluster.clock
        return clock

    def now(self) -> float:
        return self._box.call(self._clock.wall)

    @property
    def manual(self) -> bool:
        return self._clock.manual

    def advance(self, by: float | str) -> float:
        seconds = parse_span(by)
        clock = self._clock
        self._box.call_async(functools.partial(clock.advance, seconds))
        return self._box.call(clock.wall)


class TrioClock:
    """The clock of a trio-native box (``nsqbox_trio.clock``): :meth:`advance` is awaited."""

    def __init__(self, clock: Callable[[], BrokerClock]) -> None:
        self._clock = clock

    def now(self) -> float:
        """Broker time, in seconds since the epoch."""
        return self._clock().wall()

    @property
    def manual(self) -> bool:
        """Whether the box's clock is manual."""
        return self._clock().manual

    async def advance(self, by: float | str) -> float:
        """Move broker time ahead (see :meth:`Clock.advance`); broker time after."""
        clock = self._clock()
        await clock.advance(parse_span(by))
        return clock.wall()


class HTTPClock(Clock):
    """The clock through each server's ``/nsqbox/clock`` routes (subprocess, noproc)."""

    def __init__(self, addresses: BoxAddresses, *, timeout: float = 10.0, mode: str = "") -> None:
        self._addresses = addresses
        self._timeout = timeout
        self._mode = mode

    def _request(self, method: str, address: Address, path: str, **params: str) -> Any:
        try:
            body = http(method, address, path, params, timeout=self._timeout)
        except NSQHTTPError as exc:
            if exc.status == 404:
                raise ClockUnsupported(
                    f"moving time needs nsqbox's servers: {address} answered 404 to "
                    f"{_ROUTES} (a real NSQ server{self._where()})"
                ) from None
            if exc.status == 409:
                raise ClockError(f"the clock of {address} is real time, not manual") from None
            if exc.status == 400:
                raise ValueError(str(exc)) from None
            raise
        return json.loads(body)

    def _where(self) -> str:
        return f", in {self._mode} mode" if self._mode else ""

    def _clocks(self) -> dict[str, tuple[Address, dict[str, Any]]]:
        """One server per distinct clock (the servers of one box share theirs)."""
        addresses = self._addresses
        found: dict[str, tuple[Address, dict[str, Any]]] = {}
        for address in (*addresses.nsqd_http, *addresses.lookupd_http):
            try:
                doc = self._request("GET", address, _ROUTES)
            except ClockUnsupported:
                if address in addresses.nsqd_http:
                    raise
                continue  # a real nsqlookupd beside nsqbox's nsqds: it has no clock
            found.setdefault(str(doc["id"]), (address, doc))
        return found

    def now(self) -> float:
        address = self._addresses.nsqd_http[0]
        return float(self._request("GET", address, _ROUTES)["now"])

    @property
    def manual(self) -> bool:
        address = self._addresses.nsqd_http[0]
        return bool(self._request("GET", address, _ROUTES)["mode"] == "manual")

    def advance(self, by: float | str) -> float:
        by_text = repr(parse_span(by))
        answers = [
            self._request("POST", address, f"{_ROUTES}/advance", by=by_text)
            for address, _ in self._clocks().values()
        ]
        return max(float(doc["now"]) for doc in answers)


class _NoClock(Clock):
    def __init__(self, mode: str) -> None:
        self._mode = mode

    def _unsupported(self) -> ClockUnsupported:
        return ClockUnsupported(
            f"the clock is not reachable in {self._mode} mode: it needs nsqbox's servers"
        )

    def now(self) -> float:
        raise self._unsupported()

    @property
    def manual(self) -> bool:
        raise self._unsupported()

    def advance(self, by: float | str) -> float:
        raise self._unsupported()


def clock_for(box: Box, mode: str) -> Clock:
    """The clock of a box of the sync handle: thread mode reaches it on the servers'
    loop, the others (subprocess, noproc) through the servers' HTTP routes."""
    from .boxes import ThreadBox

    if isinstance(box, ThreadBox):
        return BoxClock(box)
    addresses = getattr(box, "addresses", None)
    if isinstance(addresses, BoxAddresses):
        timeout = getattr(getattr(box, "ops", None), "timeout", 10.0)
        return HTTPClock(addresses, timeout=float(timeout), mode=mode)
    return _NoClock(mode)


class ClockAccess:
    """``nsqbox.clock`` on the sync handle (a mixin of :class:`~.handle.NSQBox`)."""

    box: Box

    @functools.cached_property
    def clock(self) -> Clock:
        """The box's broker time (docs/testing.md, "Testing time")."""
        return clock_for(self.box, self.box.mode.value)
