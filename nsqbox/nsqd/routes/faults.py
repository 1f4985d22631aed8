"""nsqbox's fault routes: faults on demand over nsqd's HTTP API (issue #18).

Not part of NSQ: they let a test in any language, or the pytest plugin's
``nsqbox.faults`` in subprocess and noproc modes, make this nsqd misbehave on
purpose through its :class:`~.faults.NodeFaults`. Every route is under
``/nsqbox/``, a prefix no nsqd route uses; real nsqd answers ``404``. Answers are
JSON; bad parameters get nsqd's ``400 {"message": "INVALID_..."}``, a fault past the
64 in force ``409 TOO_MANY_FAULTS``.

- ``GET /nsqbox/faults``: ``{"faults": [{"id", "kind", "topic", "error",
  "remaining", "since", "channel", "user_agent", "client_id", "delay",
  "jitter"}]}``, the lasting faults in force, oldest first.
- ``POST /nsqbox/faults/fail_publishes?topic=&count=&duration=&error=``: publishes
  (to ``topic``, or any) fail, the next ``count`` commands or for ``duration``
  seconds or until lifted; the new fault's document.
- ``POST /nsqbox/faults/disk_full?topic=&duration=&error=``: the same, and
  ``/ping`` answers ``500 NOK - <error>``; the new fault's document.
- ``POST /nsqbox/faults/latency?delay=&jitter=&topic=&channel=&user_agent=``
  ``&client_id=&count=&duration=``: each write to matching clients waits ``delay``
  seconds (plus or minus up to ``jitter``); the new fault's document.
- ``POST /nsqbox/faults/stall?topic=&channel=&user_agent=&client_id=&count=&duration=``:
  nothing more is sent to matching clients (the first ``count`` connections); the
  new fault's document.
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

from typing import TYPE_CHECKING

from ...http import HTTPError, Request, Router
from ...http.faults import (
    FAULTS_PATH,
    MAX_TEXT_LENGTH,
    add_listing_routes,
    adding,
    arg,
    channel_arg,
    count_arg,
    flag_arg,
    seconds_arg,
    text_arg,
    topic_arg,
)
from ..domain.faults import DISK_FULL_ERROR, PUBLISH_FAILED_ERROR

if TYPE_CHECKING:
    from ..domain.nsqd import NSQD

__all__ = ["MAX_ERROR_LENGTH", "add_fault_routes"]

#: The longest ``error`` a fault may report (it goes into every failed reply).
MAX_ERROR_LENGTH = MAX_TEXT_LENGTH

Doc = dict[str, object]


def _scope(request: Request) -> dict[str, str | None]:
    """Which clients latency or a stall holds."""
    return {
        "topic": topic_arg(request),
        "channel": channel_arg(request),
        "user_agent": text_arg(request, "user_agent"),
        "client_id": text_arg(request, "client_id"),
    }


def add_fault_routes(router: Router, nsqd: NSQD) -> None:
    """Add the ``/nsqbox/faults`` routes for ``nsqd`` to its HTTP router.

    The router leaves them out with ``--auth-http-address`` (stopping others' work
    needs no secret here) and checks Host and Origin for them.
    """
    faults = nsqd.faults

    async def fail_publishes(request: Request) -> Doc:
        topic, count, duration = topic_arg(request), count_arg(request), seconds_arg(request)
        error = text_arg(request, "error") or PUBLISH_FAILED_ERROR
        return faults.fail_publishes(topic, count=count, duration=duration, error=error).describe()

    async def disk_full(request: Request) -> Doc:
        topic, duration = topic_arg(request), seconds_arg(request)
        error = text_arg(request, "error") or DISK_FULL_ERROR
        return faults.disk_full(topic, duration=duration, error=error).describe()

    async def latency(request: Request) -> Doc:
        delay = seconds_arg(request, "delay", zero=True)
        if delay is None:
            raise HTTPError(400, "MISSING_ARG_DELAY")
        jitter = seconds_arg(request, "jitter", zero=True) or 0.0
        if jitter > delay:
            raise HTTPError(400, "INVALID_JITTER")
        count, duration = count_arg(request), seconds_arg(request)
        fault = faults.latency(
            delay, jitter=jitter, count=count, duration=duration, **_scope(request)
        )
        return fault.describe()

    async def stall(request: Request) -> Doc:
        count, duration = count_arg(request), seconds_arg(request)
        return faults.stall(count=count, duration=duration, **_scope(request)).describe()

    async def time_out_in_flight(request: Request) -> Doc:
        topic, channel = topic_arg(request), channel_arg(request)
        return {"count": faults.time_out_in_flight(topic, channel)}

    async def drop_connections(request: Request) -> Doc:
        topic, channel = topic_arg(request), channel_arg(request)
        reset = flag_arg(request, "reset")
        user_agent = arg(request, "user_agent")
        dropped = faults.drop_connections(topic, channel, user_agent=user_agent, reset=reset)
        return {"count": dropped}

    add_listing_routes(router, faults)
    router.add("POST", f"{FAULTS_PATH}/fail_publishes", adding(fail_publishes))
    router.add("POST", f"{FAULTS_PATH}/disk_full", adding(disk_full))
    router.add("POST", f"{FAULTS_PATH}/latency", adding(latency))
    router.add("POST", f"{FAULTS_PATH}/stall", adding(stall))
    router.add("POST", f"{FAULTS_PATH}/time_out_in_flight", time_out_in_flight)
    router.add("POST", f"{FAULTS_PATH}/drop_connections", drop_connections)
