"""What nsqd's and nsqlookupd's ``/nsqbox/faults`` routes share (issue #18).

The query parameters of the fault routes, checked the same way on both
servers (a bad one is ``400 {"message": "INVALID_<NAME>"}``), and the routes
every fault list has: ``GET /nsqbox/faults`` lists the faults in force,
``DELETE /nsqbox/faults/:id`` lifts one (``{"lifted": true|false}``),
``DELETE /nsqbox/faults`` lifts them all (``{"lifted": N}``).

Numbers are read as Go reads them (ASCII digits only, :func:`~nsqbox.go.syntax.parse_count`
and :func:`~nsqbox.go.syntax.parse_float`), seconds at most a day
(:data:`~nsqbox.broker.faults.MAX_FAULT_SECONDS`); a server holding
:data:`~nsqbox.broker.faults.MAX_FAULTS` faults refuses the next with ``409 TOO_MANY_FAULTS``
(:func:`adding`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Awaitable, Callable

from ..broker.faults import MAX_FAULT_SECONDS, FaultLimitError, FaultList
from ..go.syntax import parse_count, parse_duration, parse_float
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .messages import HTTPError, Request
from .router import Router

__all__ = [
    "FAULTS_PATH",
    "MAX_TEXT_LENGTH",
    "add_listing_routes",
    "adding",
    "arg",
    "channel_arg",
    "count_arg",
    "flag_arg",
    "seconds_arg",
    "text_arg",
    "topic_arg",
]

#: Where the fault routes live (a prefix no NSQ route uses).
FAULTS_PATH = "/nsqbox/faults"
#: The longest free text a fault takes (an ``error``, a ``user_agent``...).
MAX_TEXT_LENGTH = 1024

Doc = dict[str, object]


def arg(request: Request, name: str) -> str | None:
    """A query parameter, None when absent or empty."""
    values = request.args().get(name)
    if not values or not values[0]:
        return None
    return values[0]


def topic_arg(request: Request) -> str | None:
    """``topic``: a valid topic name (INVALID_TOPIC)."""
    topic = arg(request, "topic")
    if topic is not None and not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_TOPIC")
    return topic


def channel_arg(request: Request) -> str | None:
    """``channel``: a valid channel name (INVALID_CHANNEL)."""
    channel = arg(request, "channel")
    if channel is not None and not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_CHANNEL")
    return channel


def count_arg(request: Request) -> int | None:
    """``count``: a whole number from 1 (INVALID_COUNT)."""
    raw = arg(request, "count")
    if raw is None:
        return None
    try:
        return parse_count(raw, least=1)
    except ValueError:
        raise HTTPError(400, "INVALID_COUNT") from None


def seconds_arg(request: Request, name: str = "duration", *, zero: bool = False) -> float | None:
    """Seconds (``0.5``) or a Go duration (``500ms``, ``1.5s``, ``2m``), positive (or 0 with
    ``zero``) and at most a day (:data:`~nsqbox.broker.faults.MAX_FAULT_SECONDS`):
    INVALID_<NAME>."""
    raw = arg(request, name)
    if raw is None:
        return None
    seconds = math.nan
    if len(raw) <= 32:
        try:
            seconds = parse_float(raw)
        except ValueError:
            with contextlib.suppress(ValueError):
                seconds = parse_duration(raw)
    if not 0 <= seconds <= MAX_FAULT_SECONDS or (seconds == 0 and not zero):
        raise HTTPError(400, f"INVALID_{name.upper()}")
    return seconds


def text_arg(request: Request, name: str) -> str | None:
    """Free text of one line, at most MAX_TEXT_LENGTH characters: INVALID_<NAME>."""
    text = arg(request, name)
    if text is not None and (len(text) > MAX_TEXT_LENGTH or any(c in text for c in "\r\n\0")):
        raise HTTPError(400, f"INVALID_{name.upper()}")
    return text


def flag_arg(request: Request, name: str) -> bool:
    """``true``/``1`` or ``false``/``0`` (absent: false): INVALID_<NAME>."""
    raw = arg(request, name)
    if raw is None or raw in ("false", "0"):
        return False
    if raw in ("true", "1"):
        return True
    raise HTTPError(400, f"INVALID_{name.upper()}")


Handler = Callable[[Request], Awaitable[Doc]]


def adding(handler: Handler) -> Handler:
    """``handler`` (a route that adds a fault) answering ``409 TOO_MANY_FAULTS`` when the
    server holds :data:`~nsqbox.broker.faults.MAX_FAULTS` already."""

    @functools.wraps(handler)
    async def add(request: Request) -> Doc:
        try:
            return await handler(request)
        except FaultLimitError:
            raise HTTPError(409, "TOO_MANY_FAULTS") from None

    return add


def add_listing_routes(router: Router, faults: FaultList) -> None:
    """Listing and lifting: ``GET``/``DELETE /nsqbox/faults``, ``DELETE /nsqbox/faults/:id``."""

    async def listing(request: Request) -> Doc:
        return {"faults": [fault.describe() for fault in faults.active()]}

    async def lift(request: Request) -> Doc:
        try:
            fault_id = parse_count(request.params["id"])
        except ValueError:
            raise HTTPError(400, "INVALID_ID") from None
        return {"lifted": faults.lift(fault_id)}

    async def lift_all(request: Request) -> Doc:
        return {"lifted": faults.lift_all()}

    router.add("GET", FAULTS_PATH, listing)
    router.add("DELETE", FAULTS_PATH, lift_all)
    router.add("DELETE", f"{FAULTS_PATH}/:id", lift)
