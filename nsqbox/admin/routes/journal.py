"""The admin service's journal routes: every node's journal, merged (issue #33).

Not part of nsqadmin. Each nsqbox nsqd keeps a journal of what happens to its messages
(``GET /nsqbox/journal``, docs/journeys.md); these routes ask every node that may know and
merge the answers (:mod:`nsqbox.admin.journal`), as ``/api/messages`` does for peeking.

=======  =====================================  =================================================
method   route                                  answer
=======  =====================================  =================================================
GET      /api/journey/:id                       ``{id, events, nodes, message}``: every node's
                                                events for message ``id``, in broker-time
                                                order, each with its ``node``
GET      /api/journal/:topic[/:channel]         ``{topic, channel, events, nodes, next,
                                                message}``: a page of the topic's (or the
                                                channel's) events over its nodes, merged in
                                                broker-time order
GET      /api/troubles/:topic/:channel          ``{topic, channel, count, messages, nodes,
                                                message}``: the channel's messages in trouble
                                                (requeued or timed out, not finished) on every
                                                node, oldest trouble first
GET      /api/given_up/:topic/:channel          ``{topic, channel, count, messages, nodes,
                                                message}``: the messages the channel's clients
                                                gave up on, on every node, newest first
=======  =====================================  =================================================

``/api/journey`` asks every nsqd (with ``topic``, the topic's nodes only) and pages like the
others with ``limit`` (events per node, at most 1000) and ``cursor``. ``/api/journal`` takes
``kind`` (comma-separated), ``since`` and ``until`` (broker ns), ``limit``, ``cursor`` (the
previous answer's ``next``) and ``node``. ``/api/troubles`` takes ``requeues``, ``held_ms``,
``timed_out=true``, ``body_bytes``, ``limit`` and ``node``; ``/api/given_up`` ``attempts``,
``body_bytes``, ``limit`` and ``node``: each passed on to the nodes' routes. Each node is
reported in ``nodes`` with ``supported``, ``listed``, ``more`` and ``error``, and what holds
for the answer: ``recorded`` and ``oldest`` (the journal's ring) for events, ``count`` (how
many messages it keeps) for troubles and given up (docs/journeys.md). A real nsqd (no
journal) is ``supported: false`` with ``error`` ``"not supported by this nsqd ..."``, and the
others are merged as usual. Errors are NSQ's ``{"message": CODE}``: ``400 INVALID_ID``,
``INVALID_TOPIC``, ``INVALID_CHANNEL``, ``INVALID_KIND``, ``INVALID_<ARG>``,
``INVALID_CURSOR``; ``404 TOPIC_NOT_FOUND``, ``NODE_NOT_FOUND``; ``502 UPSTREAM_ERROR``
when no node answered. Off (``404``) under ``--auth-http-address`` (they show message
bodies); the Host allowlist and same-origin check of every admin route.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ...go.syntax import parse_count
from ...http.messages import HTTPError, Request
from ...http.router import Router
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..clusterinfo import ClusterInfo, UpstreamError, warning
from ..stats import Producer

if TYPE_CHECKING:  # the merge over nodes loads on the first journal request, not at start
    from ..journal import (
        GivenUpResult,
        JournalQuery,
        NodeJournal,
        TroublesQuery,
        TroublesResult,
    )

__all__ = ["MAX_BODY_BYTES", "MAX_LIMIT", "add_journal_routes"]

log = logging.getLogger("nsqbox.admin")

#: The most events (or messages) per node a request may ask for, as nsqd's routes allow.
MAX_LIMIT = 1000
#: The most body bytes per message a request may ask for, as nsqd's routes allow.
MAX_BODY_BYTES = 1024 * 1024
_INT64 = (1 << 63) - 1
#: A message id as nsqd writes it: 16 hex digits (nsqd's routes take any 16 letters/digits).
_ID = 16

Found = tuple[list[Producer], tuple[UpstreamError, ...]]
Doc = dict[str, Any]


def _count(request: Request, name: str, most: int, least: int = 0) -> int | None:
    raw = request.arg(name)
    if not raw:
        return None
    try:
        return parse_count(raw, most, least=least)
    except ValueError:
        raise HTTPError(400, f"INVALID_{name.upper()}") from None


def _place(request: Request) -> tuple[str, str]:
    topic, channel = request.params["topic"], request.params.get("channel", "")
    if not is_valid_topic_name(topic):
        raise HTTPError(400, "INVALID_TOPIC")
    if channel and not is_valid_channel_name(channel):
        raise HTTPError(400, "INVALID_CHANNEL")
    return topic, channel


def _only(request: Request, producers: list[Producer]) -> list[Producer]:
    node = request.arg("node")
    if not node:
        return producers
    chosen = [p for p in producers if p.http_address == node]
    if not chosen:
        raise HTTPError(404, "NODE_NOT_FOUND")
    return chosen


def _warn(errors: tuple[UpstreamError, ...]) -> str:
    if errors:
        log.warning("%s", "\n".join(str(e) for e in errors))
    return warning(errors)


def _all_failed(what: str, errors: tuple[UpstreamError, ...], asked: int) -> None:
    if errors and len(errors) == asked:
        log.error("failed to read %s - %s", what, warning(errors))
        raise HTTPError(502, f"UPSTREAM_ERROR: {warning(errors)}")


#: What a node's report says, by the answer it is in: the ring's numbers (``recorded``,
#: ``oldest``) for events, how many messages the node keeps (``count``) for a channel's lists.
_REPORT_FIELDS: Final = ("node", "hostname", "supported", "listed")
_EVENTS_REPORT: Final = (*_REPORT_FIELDS, "more", "recorded", "oldest", "error")
_LIST_REPORT: Final = (*_REPORT_FIELDS, "count", "more", "error")


def _reports(nodes: list[NodeJournal], fields: tuple[str, ...]) -> list[Doc]:
    """Each node's report with only the ``fields`` that mean something for its answer."""
    return [{name: getattr(node, name) for name in fields} for node in nodes]


def _listed(
    what: str,
    query: TroublesQuery,
    result: TroublesResult | GivenUpResult,
    errors: tuple[UpstreamError, ...],
    **extra: int,
) -> Doc:
    """A channel's messages over its nodes as ``/api/troubles`` and ``/api/given_up`` answer
    them (``extra`` after the channel); 502 when no node answered."""
    _all_failed(what, result.errors, len(result.nodes))
    return {
        "topic": query.topic,
        "channel": query.channel,
        **extra,
        "messages": msgspec.to_builtins(result.messages),
        "nodes": _reports(result.nodes, _LIST_REPORT),
        "message": _warn(errors + result.errors),
    }


def add_journal_routes(
    router: Router,
    info: ClusterInfo,
    producers: Callable[[], Awaitable[Found]],
    topic_producers: Callable[[str], Awaitable[Found]],
) -> None:
    """Add the journal routes to the admin ``router``: ``info`` asks the nodes,
    ``producers()`` finds every nsqd and ``topic_producers(topic)`` a topic's."""

    async def events(request: Request, query: JournalQuery, found: Found) -> Doc:
        from ..journal import read_events
        from ..peek import InvalidCursor

        nodes, errors = found
        try:
            result = await read_events(info, _only(request, nodes), query)
        except InvalidCursor:
            raise HTTPError(400, "INVALID_CURSOR") from None
        _all_failed("the journal", result.errors, len(result.nodes))
        return {
            "events": msgspec.to_builtins(result.events),
            "nodes": _reports(result.nodes, _EVENTS_REPORT),
            "next": result.next,
            "message": _warn(errors + result.errors),
        }

    def limit(request: Request) -> int | None:
        return _count(request, "limit", MAX_LIMIT, least=1)

    async def journey(request: Request) -> object:
        msg_id = request.params["id"]
        if len(msg_id) != _ID or not msg_id.isascii() or not msg_id.isalnum():
            raise HTTPError(400, "INVALID_ID")
        topic = request.arg("topic") or ""
        if topic and not is_valid_topic_name(topic):
            raise HTTPError(400, "INVALID_TOPIC")
        found = await (topic_producers(topic) if topic else producers())
        from ..journal import JournalQuery

        query = JournalQuery(
            msg_id=msg_id, topic=topic, limit=limit(request), cursor=request.arg("cursor") or ""
        )
        return {"id": msg_id, **await events(request, query, found)}

    async def journal(request: Request) -> object:
        from ..journal import KINDS, JournalQuery

        topic, channel = _place(request)
        kinds = tuple(filter(None, (request.arg("kind") or "").split(",")))
        if any(kind not in KINDS for kind in kinds):
            raise HTTPError(400, "INVALID_KIND")
        query = JournalQuery(
            topic=topic,
            channel=channel,
            kinds=kinds,
            since=_count(request, "since", _INT64) or 0,
            until=_count(request, "until", _INT64) or 0,
            limit=limit(request),
            cursor=request.arg("cursor") or "",
        )
        doc = await events(request, query, await topic_producers(topic))
        return {"topic": topic, "channel": channel or None, **doc}

    def troubles_query(request: Request, *, troubles: bool) -> TroublesQuery:
        topic, channel = _place(request)
        timed_out = request.arg("timed_out") or ""
        if timed_out not in ("", "true", "false"):
            raise HTTPError(400, "INVALID_TIMED_OUT")
        from ..journal import TroublesQuery

        return TroublesQuery(
            topic=topic,
            channel=channel,
            limit=limit(request),
            body_bytes=_count(request, "body_bytes", MAX_BODY_BYTES),
            requeues=_count(request, "requeues", 1 << 16) if troubles else None,
            held_ms=_count(request, "held_ms", _INT64) if troubles else None,
            timed_out=troubles and timed_out == "true",
            attempts=None if troubles else _count(request, "attempts", 1 << 16),
        )

    async def channel_nodes(request: Request, query: TroublesQuery) -> Found:
        nodes, errors = await topic_producers(query.topic)
        return _only(request, nodes), errors

    async def troubles(request: Request) -> object:
        from ..journal import read_troubles

        query = troubles_query(request, troubles=True)
        nodes, errors = await channel_nodes(request, query)
        result = await read_troubles(info, nodes, query)
        return _listed("troubles", query, result, errors, count=result.count)

    async def given_up(request: Request) -> object:
        from ..journal import read_given_up

        query = troubles_query(request, troubles=False)
        nodes, errors = await channel_nodes(request, query)
        result = await read_given_up(info, nodes, query)
        return _listed("given-up messages", query, result, errors, count=result.count)

    router.add("GET", "/api/journey/:id", journey, nsqbox_only=True)
    router.add("GET", "/api/journal/:topic", journal, nsqbox_only=True)
    router.add("GET", "/api/journal/:topic/:channel", journal, nsqbox_only=True)
    router.add("GET", "/api/troubles/:topic/:channel", troubles, nsqbox_only=True)
    router.add("GET", "/api/given_up/:topic/:channel", given_up, nsqbox_only=True)
