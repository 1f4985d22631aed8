"""nsqadmin's JSON ``/api`` (nsqadmin/http.go, NSQ v1.3.0) on nsqbox's HTTP router.

=======  ===============================  ==========================================================
method   route                            answer
=======  ===============================  ==========================================================
GET      /ping                            ``OK``
GET      /api/topics[?inactive=true]      ``{topics: [names], message}``; with ``inactive``,
                                          ``{topics: {name: [channels]}}`` for topics no node has
GET      /api/topics/:topic               the topic summed over its nodes, per-node rows in
                                          ``nodes``, channels summed, plus ``message``
GET      /api/topics/:topic/:channel      the channel summed over the nodes, with its clients
GET      /api/nodes                       ``{nodes: [producers], message}``
GET      /api/nodes/:node                 ``{node, topics, total_messages, total_clients, message}``
GET      /api/counter                     ``{stats: {"topic:channel:node": {...}}, message}``
GET      /api/graphite                    nsqadmin's argument checks, then ``500 INTERNAL_ERROR``
GET      /metrics                         nsqbox only: every node's numbers for Prometheus, with
                                          a ``node`` label (:mod:`nsqbox.admin.metrics`)
GET      /api/messages/:topic[/:channel]  nsqbox only: the messages the channel (or the topic,
                                          for channels not yet created) holds on its nodes, by
                                          nsqd's peek route (see below)
POST     /api/topics                      body ``{topic, channel}``: create
POST     /api/topics/:topic[/:channel]    body ``{"action": "pause"|"unpause"|"empty"}``
DELETE   /api/topics/:topic[/:channel]    delete everywhere
DELETE   /api/nodes/:node                 body ``{topic}``: tombstone the topic for that node in
                                          the lookupds, then delete it on the node
*        /api/faults[/...]                nsqbox only: faults on demand (see :mod:`.fault_api`)
=======  ===============================  ==========================================================

Every answer carries ``message``: ``""``, or ``"WARNING: ..."`` naming the hosts that failed when
the others answered. When none answered: ``502 UPSTREAM_ERROR: ...``. Errors are NSQ's
``{"message": CODE}``: ``400 INVALID_BODY``, ``INVALID_TOPIC``, ``INVALID_CHANNEL``,
``INVALID_ACTION``; ``403 FORBIDDEN`` (``--admin-user``); ``404 NODE_NOT_FOUND``.

``/api/messages`` takes ``node`` (one node's HTTP address; all of the topic's nodes without
it), ``limit`` (per node), ``body_bytes`` and ``cursor`` (the ``next`` of the previous page), and
answers ``{topic, channel, messages, nodes, next, message}``: each message as nsqd's peek route
lists it plus its ``node``; each node with its counts, ``supported`` (false for real nsqd, whose
``error`` is then ``"not supported by this nsqd"``) and ``error``. ``400 INVALID_CURSOR``,
``INVALID_LIMIT``, ``INVALID_BODY_BYTES`` for arguments that are not ones.

As nsqadmin (``nsqadmin/http.go``): a per-node row's own ``nodes`` is ``null`` (Go's nil
slice; a summed row lists its nodes); an unknown channel of a known topic is ``200
{"message": ""}`` (the missing channel's fields are left out), which scripts written against
nsqadmin already read as "no data"; ``GET /api/graphite`` checks its arguments as nsqadmin
does (``400 INVALID_ARG_METRIC`` unless ``metric=rate``, ``400 INVALID_ARG_TARGET`` without
``target``, ``400 INVALID_REQUEST`` for a query that does not parse), then answers ``500
INTERNAL_ERROR``, nsqadmin's answer when it cannot reach graphite: nsqbox has none to ask.

Where nsqadmin answers oddly nsqbox answers plainly: an unknown topic is ``404 TOPIC_NOT_FOUND``
(nsqadmin: ``502 UPSTREAM_ERROR: failed to query any nsqlookupd: ...`` from the lookupds' 404s;
both fail a script's status check, and this one says why), and a topic no node has yet is an
all-zero row (nsqadmin: 502).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ...go.syntax import parse_count
from ...http.local_guard import local_guard
from ...http.messages import HTTPError, Request
from ...http.router import Router
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ...wire.peer_json import PeerJSONError, decode_peer_json
from ..actions import Action, ClusterActions
from ..box_nodes import BoxNodes
from ..clusterinfo import ClusterError, ClusterInfo, UpstreamError, warning
from ..control import NodeControl
from ..faults import ClusterFaults
from ..metrics import ClusterExporter
from ..options import AdminOptions
from ..stats import Producer, TopicStats, aggregate_channel, aggregate_topic
from .clock import ClusterClocks, add_clock_routes
from .faults import add_fault_routes
from .journal import add_journal_routes
from .snapshot import add_snapshot_routes
from .tap import Captures, add_capture_routes
from .wait import add_wait_routes

__all__ = ["AdminAPI", "build_router"]

log = logging.getLogger("nsqbox.admin")

# Request bodies are tiny JSON objects.
_MAX_BODY = 64 * 1024


class _TopicChannelBody(msgspec.Struct):
    topic: str = ""
    channel: str = ""


class _ActionBody(msgspec.Struct):
    action: str = ""


_topic_channel_decoder = msgspec.json.Decoder(_TopicChannelBody)
_action_decoder = msgspec.json.Decoder(_ActionBody)


def _decode(body: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    try:
        return decode_peer_json(body, decoder)
    except PeerJSONError:
        raise HTTPError(400, "INVALID_BODY") from None


def _upstream(what: str, exc: ClusterError) -> HTTPError:
    log.error("failed to %s - %s", what, exc)
    return HTTPError(502, f"UPSTREAM_ERROR: {exc}")


def _with_message(row: msgspec.Struct | None, errors: tuple[UpstreamError, ...]) -> object:
    body: dict[str, Any] = go_nil_nodes(msgspec.to_builtins(row)) if row is not None else {}
    body["message"] = _warn(errors)
    return body


def go_nil_nodes(doc: Any) -> Any:
    """``doc`` (stats rows as builtins) with every empty ``nodes`` list made ``None``.

    nsqadmin's rows are Go structs whose ``nodes`` slice is only appended to when rows are
    summed, so a per-node row encodes it as ``null`` (clusterinfo ``TopicStats.NodeStats``,
    ``ChannelStats.NodeStats``); nsqbox's Structs hold ``[]``. Changes ``doc`` in place.
    """
    if isinstance(doc, dict):
        if doc.get("nodes") == []:
            doc["nodes"] = None
        for value in doc.values():
            if isinstance(value, list | dict):
                go_nil_nodes(value)
    elif isinstance(doc, list):
        for item in doc:
            go_nil_nodes(item)
    return doc


def _positive_arg(request: Request, name: str, error: str) -> int | None:
    """The positive integer argument ``name``, None when absent; ``400 error`` otherwise."""
    raw = request.arg(name)
    if not raw:
        return None
    try:
        return parse_count(raw, least=1)
    except ValueError:
        raise HTTPError(400, error) from None


def _warn(errors: tuple[UpstreamError, ...] | list[UpstreamError]) -> str:
    if errors:
        log.warning("%s", "\n".join(str(e) for e in errors))
    return warning(errors)


class AdminAPI:
    """The handlers, bound to one cluster's :class:`ClusterInfo` and options."""

    def __init__(
        self, info: ClusterInfo, options: AdminOptions, control: NodeControl | None = None
    ) -> None:
        self.info = info
        self.options = options
        self.lookupds = list(options.lookupd_http_addresses)
        self.nsqds = list(options.nsqd_http_addresses)
        self.actions = ClusterActions(
            info, lookupd_http_addresses=self.lookupds, nsqd_http_addresses=self.nsqds
        )
        self.exporter = ClusterExporter(info, self.lookupds, self.nsqds, control=control)

    def _authorize(self, request: Request) -> None:
        users = self.options.admin_users
        if users and request.header(self.options.acl_http_header) not in users:
            raise HTTPError(403, "FORBIDDEN")

    async def _producers(self) -> tuple[list[Producer], tuple[UpstreamError, ...]]:
        try:
            found = await self.info.producers(self.lookupds, self.nsqds)
        except ClusterError as exc:
            raise _upstream("get nodes", exc) from None
        return found.value, found.errors

    async def _topic_producers(
        self, topic: str
    ) -> tuple[list[Producer], tuple[UpstreamError, ...]]:
        try:
            found = await self.info.topic_producers(topic, self.lookupds, self.nsqds)
        except ClusterError as exc:
            if self.lookupds and all(e.status == 404 for e in exc.errors):
                raise HTTPError(404, "TOPIC_NOT_FOUND") from None
            raise _upstream("get topic producers", exc) from None
        if not self.lookupds and not found.value:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        return found.value, found.errors

    async def _stats(
        self, producers: list[Producer], **filters: Any
    ) -> tuple[list[TopicStats], tuple[UpstreamError, ...]]:
        try:
            found = await self.info.nsqd_stats(producers, **filters)
        except ClusterError as exc:
            raise _upstream("get nsqd stats", exc) from None
        return found.value, found.errors

    # -- reading ---------------------------------------------------------------------------------

    async def ping(self, request: Request) -> object:
        return "OK"

    async def topics(self, request: Request) -> object:
        try:
            found = await self.info.topics(self.lookupds, self.nsqds)
        except ClusterError as exc:
            raise _upstream("get topics", exc) from None
        errors = list(found.errors)
        if request.arg("inactive") != "true":
            return {"topics": found.value, "message": _warn(errors)}
        inactive: dict[str, list[str]] = {}
        for topic in found.value if self.lookupds else ():
            try:
                producers = await self.info.lookupd_topic_producers(topic, self.lookupds)
                if producers.value:
                    continue
                channels = await self.info.lookupd_topic_channels(topic, self.lookupds)
            except ClusterError as exc:
                errors += exc.errors
                continue
            inactive[topic] = channels.value
        return {"topics": inactive, "message": _warn(errors)}

    async def topic(self, request: Request) -> object:
        name = request.params["topic"]
        producers, errors = await self._topic_producers(name)
        rows, more = await self._stats(producers, topic=name, include_clients=False)
        return _with_message(aggregate_topic(name, rows), errors + more)

    async def channel(self, request: Request) -> object:
        topic, channel = request.params["topic"], request.params["channel"]
        producers, errors = await self._topic_producers(topic)
        rows, more = await self._stats(producers, topic=topic, channel=channel)
        found = [c for row in rows for c in row.channels if c.channel_name == channel]
        if not found:  # nsqadmin: its nil *ChannelStats adds no fields, only the message
            return _with_message(None, errors + more)
        return _with_message(aggregate_channel(topic, channel, found), errors + more)

    async def nodes(self, request: Request) -> object:
        producers, errors = await self._producers()
        return {"nodes": msgspec.to_builtins(producers), "message": _warn(errors)}

    async def node(self, request: Request) -> object:
        name = request.params["node"]
        producers, errors = await self._producers()
        producer = next((p for p in producers if p.http_address == name), None)
        if producer is None:
            raise HTTPError(404, "NODE_NOT_FOUND")
        try:
            rows = await self.info.node_stats(name, hostname=producer.hostname)
        except UpstreamError as exc:
            log.error("failed to get nsqd stats - %s", exc)
            raise HTTPError(502, f"UPSTREAM_ERROR: {exc}") from None
        return {
            "node": name,
            "topics": go_nil_nodes(msgspec.to_builtins(rows)),
            "total_messages": sum(t.message_count for t in rows),
            "total_clients": sum(len(c.clients) for t in rows for c in t.channels),
            "message": _warn(errors),
        }

    async def counter(self, request: Request) -> object:
        producers, errors = await self._producers()
        rows, more = await self._stats(producers, include_clients=False)
        stats: dict[str, dict[str, Any]] = {}
        for topic in rows:
            for channel in topic.channels:
                key = f"{topic.topic_name}:{channel.channel_name}:{channel.node}"
                entry = stats.setdefault(
                    key,
                    {
                        "node": channel.node,
                        "topic_name": topic.topic_name,
                        "channel_name": channel.channel_name,
                        "message_count": 0,
                    },
                )
                entry["message_count"] += channel.message_count
        return {"stats": stats, "message": _warn(errors + more)}

    async def graphite(self, request: Request) -> object:
        """nsqadmin's graphiteHandler up to the request it would send to graphite."""
        if request.arg("metric") != "rate":
            raise HTTPError(400, "INVALID_ARG_METRIC")
        if request.arg("target") is None:  # Go's ReqParams.Get: absent, not empty
            raise HTTPError(400, "INVALID_ARG_TARGET")
        log.error("graphite request failed - nsqbox has no graphite (--graphite-url)")
        raise HTTPError(500, "INTERNAL_ERROR")

    async def metrics(self, request: Request) -> object:
        try:
            return await self.exporter.render(request.header("Accept"))
        except ClusterError as exc:
            raise _upstream("get nodes", exc) from None

    async def messages(self, request: Request) -> object:
        from ..peek import InvalidCursor, PeekQuery, peek_nodes  # loads on the first peek

        topic, channel = request.params["topic"], request.params.get("channel", "")
        if not is_valid_topic_name(topic):
            raise HTTPError(400, "INVALID_TOPIC")
        if channel and not is_valid_channel_name(channel):
            raise HTTPError(400, "INVALID_CHANNEL")
        limit = _positive_arg(request, "limit", "INVALID_LIMIT")
        body_bytes = _positive_arg(request, "body_bytes", "INVALID_BODY_BYTES")
        producers, errors = await self._topic_producers(topic)
        node = request.arg("node")
        if node:
            producers = [p for p in producers if p.http_address == node]
            if not producers:
                raise HTTPError(404, "NODE_NOT_FOUND")
        try:
            query = PeekQuery(topic, channel, limit, body_bytes, request.arg("cursor") or "")
            result = await peek_nodes(self.info, producers, query)
        except InvalidCursor:
            raise HTTPError(400, "INVALID_CURSOR") from None
        if result.errors and len(result.errors) == len(result.nodes):
            log.error("failed to peek - %s", warning(result.errors))
            raise HTTPError(502, f"UPSTREAM_ERROR: {warning(result.errors)}")
        return {
            "topic": topic,
            "channel": channel or None,
            "messages": msgspec.to_builtins(result.messages),
            "nodes": msgspec.to_builtins(result.nodes),
            "next": result.next,
            "message": _warn(errors + result.errors),
        }

    # -- changing --------------------------------------------------------------------------------

    async def _act(
        self, what: str, action: Callable[[], Awaitable[tuple[UpstreamError, ...]]]
    ) -> object:
        try:
            errors = await action()
        except ClusterError as exc:
            raise _upstream(what, exc) from None
        return {"message": _warn(errors)}

    async def create(self, request: Request) -> object:
        self._authorize(request)
        body: _TopicChannelBody = _decode(request.body, _topic_channel_decoder)
        if not is_valid_topic_name(body.topic):
            raise HTTPError(400, "INVALID_TOPIC")
        if body.channel and not is_valid_channel_name(body.channel):
            raise HTTPError(400, "INVALID_CHANNEL")
        return await self._act(
            "create topic/channel", lambda: self.actions.create_topic(body.topic, body.channel)
        )

    async def topic_action(self, request: Request) -> object:
        return await self._topic_channel_action(request, request.params["topic"], "")

    async def channel_action(self, request: Request) -> object:
        params = request.params
        return await self._topic_channel_action(request, params["topic"], params["channel"])

    async def _topic_channel_action(self, request: Request, topic: str, channel: str) -> object:
        self._authorize(request)
        body: _ActionBody = _decode(request.body, _action_decoder)
        try:
            action = Action(body.action)
        except ValueError:
            raise HTTPError(400, "INVALID_ACTION") from None
        if channel:
            return await self._act(
                f"{action.value} topic/channel",
                lambda: self.actions.channel_action(topic, channel, action),
            )
        return await self._act(
            f"{action.value} topic/channel", lambda: self.actions.topic_action(topic, action)
        )

    async def delete_topic(self, request: Request) -> object:
        self._authorize(request)
        topic = request.params["topic"]
        return await self._act("delete topic", lambda: self.actions.delete_topic(topic))

    async def delete_channel(self, request: Request) -> object:
        self._authorize(request)
        topic, channel = request.params["topic"], request.params["channel"]
        return await self._act(
            "delete channel", lambda: self.actions.delete_channel(topic, channel)
        )

    async def tombstone(self, request: Request) -> object:
        self._authorize(request)
        node = request.params["node"]
        body: _TopicChannelBody = _decode(request.body, _topic_channel_decoder)
        if not is_valid_topic_name(body.topic):
            raise HTTPError(400, "INVALID_TOPIC")
        return await self._act(
            "tombstone node for topic",
            lambda: self.actions.tombstone_topic_producer(body.topic, node),
        )


def build_router(
    info: ClusterInfo, options: AdminOptions, control: NodeControl | None = None
) -> Router:
    """The admin HTTP API for the cluster ``options`` names, answering through ``info``;
    ``control`` restarts, crashes and starts the box's nodes (``/api/faults``)."""
    api = AdminAPI(info, options, control)
    broadcast = options.box_broadcast_address or None
    router = Router(
        max_body_size=_MAX_BODY,
        logger=logging.getLogger("nsqbox.admin.http"),
        # Every route checks Host and Origin: a browser needs no other name for the admin.
        guard=local_guard(options.allowed_hosts, broadcast, every_route=True),
        # With the box's auth: no node control, faults, clock or message bodies (404).
        nsqbox_routes=not options.auth_http_addresses,
    )
    router.add("GET", "/ping", api.ping, plain_text=True)
    router.add("GET", "/api/topics", api.topics)
    router.add("GET", "/api/topics/:topic", api.topic)
    router.add("GET", "/api/topics/:topic/:channel", api.channel)
    router.add("GET", "/api/nodes", api.nodes)
    router.add("GET", "/api/nodes/:node", api.node)
    router.add("GET", "/api/counter", api.counter)
    router.add("GET", "/api/graphite", api.graphite)
    router.add("GET", "/metrics", api.metrics, log=False)  # scraped every few seconds
    router.add("GET", "/api/messages/:topic", api.messages, nsqbox_only=True)
    router.add("GET", "/api/messages/:topic/:channel", api.messages, nsqbox_only=True)
    router.add("POST", "/api/topics", api.create)
    router.add("POST", "/api/topics/:topic", api.topic_action)
    router.add("POST", "/api/topics/:topic/:channel", api.channel_action)
    router.add("DELETE", "/api/topics/:topic", api.delete_topic)
    router.add("DELETE", "/api/topics/:topic/:channel", api.delete_channel)
    router.add("DELETE", "/api/nodes/:node", api.tombstone)
    faults = ClusterFaults(info, api.lookupds, api.nsqds, control=control)
    add_fault_routes(router, faults, api._authorize)
    add_clock_routes(router, ClusterClocks(faults), api._authorize)  # nsqbox's /api/clock
    nodes = BoxNodes(faults)  # nsqbox's test handle over HTTP: /api/wait, consume, captures
    add_wait_routes(router, nodes, api._authorize)
    add_capture_routes(router, Captures(nodes))
    add_snapshot_routes(router, control, api._authorize)  # nsqbox's /api/snapshot
    add_journal_routes(router, info, api._producers, api._topic_producers)  # /api/journey...
    return router
