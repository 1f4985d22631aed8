"""nsqlookupd's HTTP API (nsqlookupd/http.go) on nsqbox's router.

Responses are NSQ 1.x's plain JSON (no ``status_code``/``data`` envelope) with
NSQ's header and ``{"message": CODE}`` errors, which the HTTP layer adds. The
mutating routes answer POST only, as v1.3.0 does (``405`` to GET, so that a link
or an ``<img>`` cannot change lookupd's state; pre-1.0 nsqlookupd and the seed
docs' ``curl`` examples used GET), and the pre-1.0 ``/tombstone_topic_producer``
is gone, as in v1.3.0.
"""

from __future__ import annotations

from ... import NSQ_VERSION
from ...http.clock import add_clock_routes
from ...http.local_guard import local_guard
from ...http.messages import HTTPError, Request
from ...http.router import Handler, Router
from ...wire.documents import LookupDocument, NodesDocument
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..core import NSQLookupd
from .faults import add_fault_routes

__all__ = ["build_router"]

# lookupd takes its parameters from the query string; bodies are ignored.
_MAX_BODY = 64 * 1024


def _required(request: Request, name: str, missing: str) -> str:
    value = request.arg(name)
    if value is None:
        raise HTTPError(400, missing)
    return value


def _topic_channel(request: Request) -> tuple[str, str]:
    """http_api.GetTopicChannelArgs: both required, both valid, checked in this order."""
    topic = _required(request, "topic", "MISSING_ARG_TOPIC")
    if not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_ARG_TOPIC")
    channel = _required(request, "channel", "MISSING_ARG_CHANNEL")
    if not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_ARG_CHANNEL")
    return topic, channel


def build_router(lookupd: NSQLookupd) -> Router:
    """The complete nsqlookupd HTTP API for ``lookupd``."""
    opts = lookupd.options
    broadcast = opts.box_broadcast_address or opts.effective_broadcast_address()
    router = Router(
        max_body_size=_MAX_BODY,
        guard=local_guard(opts.allowed_hosts, broadcast),
        nsqbox_routes=not opts.auth_http_addresses,  # with auth, /nsqbox/... answer 404
    )

    async def ping(request: Request) -> object:
        return "OK"

    async def info(request: Request) -> object:
        return {"version": NSQ_VERSION}

    async def debug(request: Request) -> object:
        return lookupd.debug()

    async def lookup(request: Request) -> object:
        topic = _required(request, "topic", "MISSING_ARG_TOPIC")
        found = lookupd.lookup(topic)
        if found is None:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        channels, producers = found
        return LookupDocument(channels, producers)

    async def topics(request: Request) -> object:
        return {"topics": lookupd.topics()}

    async def channels(request: Request) -> object:
        topic = _required(request, "topic", "MISSING_ARG_TOPIC")
        return {"channels": lookupd.channels(topic)}

    async def nodes(request: Request) -> object:
        return NodesDocument(lookupd.nodes())

    async def create_topic(request: Request) -> object:
        topic = _required(request, "topic", "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic):
            raise HTTPError(400, "INVALID_ARG_TOPIC")
        lookupd.create_topic(topic)
        return None

    async def delete_topic(request: Request) -> object:
        lookupd.delete_topic(_required(request, "topic", "MISSING_ARG_TOPIC"))
        return None

    async def tombstone_topic_producer(request: Request) -> object:
        topic = _required(request, "topic", "MISSING_ARG_TOPIC")
        node = _required(request, "node", "MISSING_ARG_NODE")
        lookupd.tombstone_topic_producer(topic, node)
        return None

    async def create_channel(request: Request) -> object:
        lookupd.create_channel(*_topic_channel(request))
        return None

    async def delete_channel(request: Request) -> object:
        if not lookupd.delete_channel(*_topic_channel(request)):
            raise HTTPError(404, "CHANNEL_NOT_FOUND")
        return None

    faults = lookupd.faults

    def answering(handler: Handler) -> Handler:
        """``handler``, silent while the fault ``lookupd_down`` is in force."""

        async def answer(request: Request) -> object:
            if faults.down:
                await faults.wait_up()
            return await handler(request)

        return answer

    router.add("GET", "/ping", answering(ping), plain_text=True)
    router.add("GET", "/info", answering(info))
    router.add("GET", "/debug", answering(debug))
    router.add("GET", "/lookup", answering(lookup))
    router.add("GET", "/topics", answering(topics))
    router.add("GET", "/channels", answering(channels))
    router.add("GET", "/nodes", answering(nodes))
    mutating = {
        "/topic/create": create_topic,
        "/topic/delete": delete_topic,
        "/channel/create": create_channel,
        "/channel/delete": delete_channel,
        "/topic/tombstone": tombstone_topic_producer,
    }
    for path, handler in mutating.items():
        # POST only, as nsqlookupd v1.3.0 (405 to GET): a link or an <img> cannot change state
        router.add("POST", path, answering(handler))
    add_fault_routes(router, faults)
    add_clock_routes(router, lookupd.broker)  # nsqbox's own /nsqbox/clock (time control)
    return router
