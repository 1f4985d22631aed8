"""nsqbox's clock routes on nsqd and nsqlookupd: broker time over HTTP (issue #24).

Not part of NSQ (the real servers answer ``404``): they let a test in any language,
or the pytest plugin's ``nsqbox.clock`` in subprocess and noproc modes, read and
move the box's :class:`~nsqbox.broker.clock.BrokerClock`. The box's servers share one
clock, so moving it through any of them moves the whole box.

- ``GET /nsqbox/clock``: ``{"id", "mode", "now", "offset"}``: the clock's id (nodes
  answering the same id share it), ``real`` or ``manual``, broker time in seconds
  since the epoch, and how far it is ahead of real time.
- ``POST /nsqbox/clock/advance?by=1h``: move a manual clock ``by`` (a Go duration,
  or seconds) ahead; every deferred message, REQ delay and in-flight timeout due
  inside the span fires, in deadline order, and the answer (the clock's document
  plus ``"fired"``) comes once the deliveries are on their way. ``400
  MISSING_ARG_BY`` or ``INVALID_BY`` for a bad span, ``400 OFFSET_LIMIT`` when
  broker time would run more than ten years ahead of real time in all
  (:data:`~nsqbox.broker.clock.MAX_OFFSET`), ``409 CLOCK_NOT_MANUAL`` on the real clock.
"""

from __future__ import annotations

from ..broker.clock import BrokerClock, ClockLimitError, parse_span
from .messages import HTTPError, Request
from .router import Router

__all__ = ["CLOCK_PATH", "add_clock_routes", "span_arg"]

#: Where the clock routes live (beside ``/nsqbox/faults``).
CLOCK_PATH = "/nsqbox/clock"

Doc = dict[str, object]


def span_arg(request: Request) -> float:
    """``by``: seconds or a Go duration, above 0 and at most a year (MISSING_ARG_BY, INVALID_BY)."""
    values = request.args().get("by")
    if not values or not values[0]:
        raise HTTPError(400, "MISSING_ARG_BY")
    try:
        return parse_span(values[0])
    except ValueError:
        raise HTTPError(400, "INVALID_BY") from None


def add_clock_routes(router: Router, clock: BrokerClock) -> None:
    """Add ``GET /nsqbox/clock`` and ``POST /nsqbox/clock/advance`` for ``clock``."""

    async def show(request: Request) -> Doc:
        return clock.describe()

    async def advance(request: Request) -> Doc:
        seconds = span_arg(request)
        if not clock.manual:
            raise HTTPError(409, "CLOCK_NOT_MANUAL")
        try:
            fired = await clock.advance(seconds)
        except ClockLimitError:
            raise HTTPError(400, "OFFSET_LIMIT") from None
        return {**clock.describe(), "fired": fired}

    router.add("GET", CLOCK_PATH, show)
    router.add("POST", f"{CLOCK_PATH}/advance", advance)
