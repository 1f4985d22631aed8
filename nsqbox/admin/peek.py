"""Reading nsqbox's peek route (``GET /nsqbox/peek``) from a topic's nodes, merged.

:func:`peek_nodes` asks each node for one page of what a channel (or a topic, for the
messages of channels not yet created) holds and merges the pages: every message is tagged
with its node, every node gets a :class:`NodePeek` saying what it answered. Real nsqd has no
peek route and answers ``404 NOT_FOUND``: such a node is marked ``supported=False`` with
:data:`NOT_SUPPORTED`, and the others are listed as usual.

Paging keeps one nsqd cursor per node, carried in one opaque cursor (:func:`encode_cursor`):
base64url of ``{"node http address": "nsqd cursor", ...}`` for the nodes with more to list.
The first page asks every node; the following ones only the nodes the cursor names.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from ..wire.peer_json import PeerJSONError, decode_peer_json
from .clusterinfo import ClusterInfo, UpstreamError, gather
from .stats import Producer

__all__ = [
    "NOT_SUPPORTED",
    "PEEK_PATH",
    "InvalidCursor",
    "NodePeek",
    "PeekMessage",
    "PeekPage",
    "PeekQuery",
    "PeekResult",
    "decode_cursor",
    "decode_peek_page",
    "encode_cursor",
    "error_code",
    "peek_nodes",
]

#: nsqbox's peek route on nsqd.
PEEK_PATH = "/nsqbox/peek"
#: What a node without the peek route (real nsqd) is reported as.
NOT_SUPPORTED = "not supported by this nsqd"
#: nsqbox's answers when the topic or channel is not on the node (peeking never creates one).
_ABSENT = frozenset({"TOPIC_NOT_FOUND", "CHANNEL_NOT_FOUND"})


@dataclass(frozen=True, slots=True)
class PeekQuery:
    """What to peek at: ``channel`` of ``topic`` ("" for the topic itself), up to ``limit``
    messages a node with up to ``body_bytes`` of each body, from ``cursor`` (a previous
    result's ``next``; "" for the first page). None: the node's default."""

    topic: str
    channel: str = ""
    limit: int | None = None
    body_bytes: int | None = None
    cursor: str = ""


class PeekMessage(msgspec.Struct, omit_defaults=True):
    """One message of a peek page (see :mod:`nsqbox.nsqd.routes.peek`); ``body`` is base64.

    ``id`` to ``body`` are always there (``attempts`` 0 too: a message not yet delivered);
    the others only where they apply.
    """

    id: str
    state: str
    attempts: int
    timestamp: int
    size: int
    body: str
    node: str = ""
    defer_ms: int | None = None
    defer_left_ms: int | None = None
    timeout_left_ms: int | None = None
    client_id: int | None = None
    client: str | None = None


class PeekPage(msgspec.Struct):
    """One node's answer to ``GET /nsqbox/peek``."""

    topic: str = ""
    channel: str | None = None
    depth: int = 0
    in_flight_count: int = 0
    deferred_count: int = 0
    messages: list[PeekMessage] = []
    next: str | None = None
    disk_error: str | None = None


class _ErrorDoc(msgspec.Struct):
    message: str = ""


_page_decoder = msgspec.json.Decoder(PeekPage)
_error_decoder = msgspec.json.Decoder(_ErrorDoc)
_cursor_decoder = msgspec.json.Decoder(dict[str, str])


def decode_peek_page(body: bytes) -> PeekPage:
    """A peek answer; PeerJSONError when it is not one."""
    return decode_peer_json(body, _page_decoder)


class InvalidCursor(ValueError):
    """A merged cursor that :func:`decode_cursor` cannot read."""


def encode_cursor(cursors: Mapping[str, str]) -> str | None:
    """The opaque cursor for per-node ``cursors``; None when no node has more."""
    if not cursors:
        return None
    raw = msgspec.json.encode(dict(sorted(cursors.items())))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> dict[str, str]:
    """The per-node cursors of an opaque cursor; :class:`InvalidCursor` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        cursors = decode_peer_json(raw, _cursor_decoder)
    except (binascii.Error, ValueError, PeerJSONError) as exc:
        raise InvalidCursor(str(exc)) from None
    if not cursors:
        raise InvalidCursor("empty cursor")
    return cursors


@dataclass(slots=True)
class NodePeek:
    """What one node answered: its counts, or why it listed nothing.

    ``supported`` is False for a node without the peek route (real nsqd); ``error`` says
    :data:`NOT_SUPPORTED` then, ``TOPIC_NOT_FOUND`` / ``CHANNEL_NOT_FOUND`` when the node has
    no such topic or channel, or the request's failure.
    """

    node: str
    hostname: str = ""
    supported: bool = True
    depth: int = 0
    in_flight_count: int = 0
    deferred_count: int = 0
    listed: int = 0
    disk_error: str | None = None
    error: str = ""


@dataclass(slots=True)
class PeekResult:
    """The merged page: every node's messages in node order, per-node reports, next cursor."""

    messages: list[PeekMessage] = field(default_factory=list)
    nodes: list[NodePeek] = field(default_factory=list)
    next: str | None = None
    errors: tuple[UpstreamError, ...] = ()


def error_code(exc: UpstreamError) -> str:
    """The ``message`` of the error document a node answered (nsqd's
    ``{"message": "TOPIC_NOT_FOUND"}``); "" when the body is not one."""
    try:
        return decode_peer_json(exc.body, _error_decoder).message
    except PeerJSONError:
        return ""


async def peek_nodes(
    info: ClusterInfo,
    producers: Sequence[Producer],
    query: PeekQuery,
) -> PeekResult:
    """One merged page from ``producers`` (up to ``query.limit`` messages from each node).

    With a ``query.cursor`` (from a previous result's ``next``) only the nodes it names are
    asked, each from where it left off. :class:`InvalidCursor` if it cannot be read.
    """
    cursors = decode_cursor(query.cursor) if query.cursor else None
    asked = [p for p in producers if cursors is None or p.http_address in cursors]
    params: dict[str, str] = {"topic": query.topic}
    if query.channel:
        params["channel"] = query.channel
    if query.limit is not None:
        params["limit"] = str(query.limit)
    if query.body_bytes is not None:
        params["body_bytes"] = str(query.body_bytes)

    async def fetch(producer: Producer) -> PeekPage:
        node = producer.http_address
        node_params = dict(params)
        if cursors is not None:
            node_params["cursor"] = cursors[node]
        body = await info.get(node, PEEK_PATH, node_params)
        try:
            return decode_peek_page(body)
        except PeerJSONError as exc:
            raise UpstreamError(node, PEEK_PATH, f"bad response - {exc}") from exc

    results = await gather(asked, fetch)
    merged = PeekResult()
    errors: list[UpstreamError] = []
    following: dict[str, str] = {}
    for producer, answer in zip(asked, results, strict=True):
        node = producer.http_address
        report = NodePeek(node=node, hostname=producer.hostname)
        merged.nodes.append(report)
        if isinstance(answer, UpstreamError):
            code = error_code(answer) if answer.status == 404 else ""
            if code in _ABSENT:
                report.error = code
            elif answer.status == 404:
                report.supported, report.error = False, NOT_SUPPORTED
            else:
                report.error = str(answer)
                errors.append(answer)
            continue
        report.depth = answer.depth
        report.in_flight_count = answer.in_flight_count
        report.deferred_count = answer.deferred_count
        report.listed = len(answer.messages)
        report.disk_error = answer.disk_error
        merged.messages.extend(msgspec.structs.replace(m, node=node) for m in answer.messages)
        if answer.next is not None:
            following[node] = answer.next
    merged.next = encode_cursor(following)
    merged.errors = tuple(errors)
    return merged
