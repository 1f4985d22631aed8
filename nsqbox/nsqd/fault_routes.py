"""nsqbox's fault routes: faults on demand over nsqd's HTTP API (issue #18).

Not part of NSQ: they let a test in any language, or the pytest plugin's
``nsqbox.faults`` in subprocess and noproc modes, make this nsqd misbehave on
purpose through its :class:`~.faults.NodeFaults`. Every route is under
``/nsqbox/``, a prefix no nsqd route uses; real nsqd answers ``404``. Answers are
JSON; bad parameters get nsqd's ``400 {"message": "INVALID_..."}``.

- ``GET /nsqbox/faults``: ``{"faults": [{"id", "kind", "topic", "error",
  "remaining", "since"}]}``, the lasting faults in force, oldest first.
- ``POST /nsqbox/faults/fail_publishes?topic=&count=&duration=&error=``: publishes
  (to ``topic``, or any) fail, the next ``count`` commands or for ``duration``
  seconds or until lifted; the new fault's document.
- ``POST /nsqbox/faults/disk_full?topic=&duration=&error=``: the same, and
  ``/ping`` answers ``500 NOK - <error>``; the new fault's document.
- ``POST /nsqbox/faults/time_out_in_flight?topic=&channel=``: time out what is in
  flight now; ``{"count": N}``.
- ``POST /nsqbox/faults/drop_connections?topic=&channel=&user_agent=&reset=``:
  close client connections (an RST with ``reset=true``); ``{"count": N}``.
- ``DELETE /nsqbox/faults/:id``: lift one fault; ``{"lifted": true}``, or
  ``false`` when it had already ended.
- ``DELETE /nsqbox/faults``: lift every fault; ``{"lifted": N}``.

The routes exist only while nsqd has no ``--auth-http-address``: they would let a
client without a secret stop authorized clients' work.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..http import HTTPError, Request, Router
from ..wire.names import is_valid_channel_name, is_valid_topic_name
from .faults import DISK_FULL_ERROR, PUBLISH_FAILED_ERROR

if TYPE_CHECKING:
    from .nsqd import NSQD

__all__ = ["MAX_ERROR_LENGTH", "add_fault_routes"]

#: The longest ``error`` a fault may report (it goes into every failed reply).
MAX_ERROR_LENGTH = 1024

Doc = dict[str, object]


def _arg(request: Request, name: str) -> str | None:
    """A query parameter, None when absent or empty."""
    values = request.args().get(name)
    if not values or not values[0]:
        return None
    return values[0]


def _topic(request: Request) -> str | None:
    topic = _arg(request, "topic")
    if topic is not None and not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_TOPIC")
    return topic


def _channel(request: Request) -> str | None:
    channel = _arg(request, "channel")
    if channel is not None and not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_CHANNEL")
    return channel


def _count(request: Request) -> int | None:
    raw = _arg(request, "count")
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 18 or int(raw) < 1:
        raise HTTPError(400, "INVALID_COUNT")
    return int(raw)


def _duration(request: Request) -> float | None:
    raw = _arg(request, "duration")
    if raw is None:
        return None
    try:
        seconds = float(raw) if len(raw) <= 32 else math.nan
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise HTTPError(400, "INVALID_DURATION")
    return seconds


def _error(request: Request, default: str) -> str:
    error = _arg(request, "error")
    if error is None:
        return default
    if len(error) > MAX_ERROR_LENGTH or any(c in error for c in "\r\n\0"):
        raise HTTPError(400, "INVALID_ERROR")
    return error


def _reset(request: Request) -> bool:
    raw = _arg(request, "reset")
    if raw is None or raw in ("false", "0"):
        return False
    if raw in ("true", "1"):
        return True
    raise HTTPError(400, "INVALID_RESET")


def add_fault_routes(router: Router, nsqd: NSQD) -> None:
    """Add the ``/nsqbox/faults`` routes for ``nsqd`` to its HTTP router.

    None with ``--auth-http-address``: stopping others' work needs no secret here.
    """
    if nsqd.options.auth_http_addresses:
        return
    faults = nsqd.faults

    async def listing(request: Request) -> Doc:
        return {"faults": [fault.describe() for fault in faults.active()]}

    async def fail_publishes(request: Request) -> Doc:
        topic, count, duration = _topic(request), _count(request), _duration(request)
        error = _error(request, PUBLISH_FAILED_ERROR)
        return faults.fail_publishes(topic, count=count, duration=duration, error=error).describe()

    async def disk_full(request: Request) -> Doc:
        topic, duration = _topic(request), _duration(request)
        error = _error(request, DISK_FULL_ERROR)
        return faults.disk_full(topic, duration=duration, error=error).describe()

    async def time_out_in_flight(request: Request) -> Doc:
        topic, channel = _topic(request), _channel(request)
        return {"count": faults.time_out_in_flight(topic, channel)}

    async def drop_connections(request: Request) -> Doc:
        topic, channel, reset = _topic(request), _channel(request), _reset(request)
        user_agent = _arg(request, "user_agent")
        dropped = faults.drop_connections(topic, channel, user_agent=user_agent, reset=reset)
        return {"count": dropped}

    async def lift(request: Request) -> Doc:
        raw = request.params["id"]
        if not raw.isdigit() or len(raw) > 18:
            raise HTTPError(400, "INVALID_ID")
        return {"lifted": faults.lift(int(raw))}

    async def lift_all(request: Request) -> Doc:
        return {"lifted": faults.lift_all()}

    router.add("GET", "/nsqbox/faults", listing)
    router.add("DELETE", "/nsqbox/faults", lift_all)
    router.add("POST", "/nsqbox/faults/fail_publishes", fail_publishes)
    router.add("POST", "/nsqbox/faults/disk_full", disk_full)
    router.add("POST", "/nsqbox/faults/time_out_in_flight", time_out_in_flight)
    router.add("POST", "/nsqbox/faults/drop_connections", drop_connections)
    router.add("DELETE", "/nsqbox/faults/:id", lift)
