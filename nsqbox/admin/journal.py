"""Reading nsqd's journal routes (``/nsqbox/journal``...) from a cluster's nodes, merged.

Every nsqbox nsqd keeps a journal of what happens to messages (issue #33, docs/journeys.md);
each node knows only its own. :func:`read_events` asks each node for one page of the events
that match a :class:`JournalQuery` and merges them in broker-time order (the nodes of a box
share one broker clock), each event tagged with its node; :func:`read_troubles` and
:func:`read_given_up` merge a channel's messages in trouble and the ones its clients gave up
on. Every node gets a :class:`NodeJournal` saying what it answered. Real nsqd has no journal
and answers ``404 NOT_FOUND``: such a node is marked ``supported=False`` with
:data:`NOT_SUPPORTED`; a node with ``--journal-size=0`` answers ``404 JOURNAL_OFF`` and is
marked with :data:`JOURNAL_OFF`; the others are merged as usual.

Paging keeps one ``after`` per node in one opaque cursor (:func:`~.peek.encode_cursor`). A
merged page stops at the *horizon*: the earliest last event of the nodes that have more to
list, so that no later page holds an event older than one already given; each node's
``after`` is the number of its last event given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Final, TypeVar

import msgspec

from ..wire.peer_json import PeerJSONError, decode_peer_json
from .clusterinfo import ClusterInfo, UpstreamError, gather
from .peek import InvalidCursor, decode_cursor, encode_cursor, error_code
from .stats import Producer

__all__ = [
    "GIVEN_UP_PATH",
    "JOURNAL_OFF",
    "JOURNAL_PATH",
    "KINDS",
    "NOT_SUPPORTED",
    "TROUBLES_PATH",
    "Event",
    "EventsResult",
    "GivenUp",
    "GivenUpResult",
    "JournalQuery",
    "NodeJournal",
    "Trouble",
    "TroublesQuery",
    "TroublesResult",
    "Who",
    "read_events",
    "read_given_up",
    "read_troubles",
]

#: nsqbox's journal routes on nsqd.
JOURNAL_PATH = "/nsqbox/journal"
TROUBLES_PATH = "/nsqbox/journal/troubles"
GIVEN_UP_PATH = "/nsqbox/journal/given_up"
#: What a node without the journal routes (real nsqd) is reported as.
NOT_SUPPORTED = "not supported by this nsqd (it keeps no journal: real NSQ)"
#: What a node whose journal is off (``--journal-size=0``) is reported as.
JOURNAL_OFF = "journal off on this nsqd (--journal-size=0)"
#: The kinds of event a journal records, as nsqd names them (docs/journeys.md).
KINDS = (
    "published",
    "queued",
    "delivered",
    "touched",
    "requeued",
    "timed_out",
    "finished",
    "dropped",
    "deferred",
    "due",
)


#: An event number from a node: it goes back to the node as ``after``, which takes 0 to 2**63-1.
_Count = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]


class Event(msgspec.Struct, omit_defaults=True):
    """One event of a node's journal (see docs/routes.md); ``node`` is added by the merge.

    ``n`` to ``id`` are always there, as the node writes them (``channel`` ``""`` for a
    topic's own); the others only for the kinds that have them (a field that is null at
    the node is left out).
    """

    n: _Count
    time: int
    kind: str
    topic: str
    channel: str
    id: str
    node: str = ""
    size: int | None = None
    via: str | None = None
    defer_ms: int | None = None
    client: int | None = None
    remote_address: str | None = None
    user_agent: str | None = None
    hostname: str | None = None
    client_id: str | None = None
    to: str | None = None
    attempt: int | None = None
    timeout_ms: int | None = None
    deadline: int | None = None
    timeout_left_ms: int | None = None
    delay_ms: int | None = None
    held_ms: float | None = None
    since_publish_ms: float | None = None
    why: str | None = None
    on_disk: int | None = None


class Who(msgspec.Struct, omit_defaults=True):
    """A client as a node's journal knows it (its connection's id, and what it said)."""

    client: int = 0
    remote_address: str = ""
    user_agent: str = ""
    hostname: str = ""
    client_id: str = ""


class Trouble(msgspec.Struct):
    """A message of a channel whose delivery went wrong and that is not finished yet."""

    id: str
    timestamp: int
    since: int
    requeues: int
    timeouts: int
    last_client: Who
    held_longest_ms: float
    size: int
    body: str
    node: str = ""


class GivenUp(msgspec.Struct):
    """A message finished after earlier deliveries of it failed (a client gave up on it)."""

    id: str
    time: int
    timestamp: int
    attempts: int
    requeues: int
    timeouts: int
    finished_by: Who
    size: int
    body: str
    node: str = ""


class _EventsPage(msgspec.Struct):
    size: int = 0
    recorded: int = 0
    oldest: int = 0
    events: list[Event] = []
    next: int | None = None


class _TroublesPage(msgspec.Struct):
    count: int = 0
    messages: list[Trouble] = []


#: The most given-up messages an nsqd keeps (docs/journeys.md): a node saying more is wrong.
_MOST_GIVEN_UP: Final = 10_000


class _GivenUpPage(msgspec.Struct):
    #: None from a node older than the count (it listed what it has, up to the limit).
    count: int | None = None
    messages: list[GivenUp] = []


_events_decoder = msgspec.json.Decoder(_EventsPage)
_troubles_decoder = msgspec.json.Decoder(_TroublesPage)
_given_up_decoder = msgspec.json.Decoder(_GivenUpPage)

_Page = TypeVar("_Page", _EventsPage, _TroublesPage, _GivenUpPage)
_Item = TypeVar("_Item", Event, Trouble, GivenUp)
#: The most digits of an event number (below 2**63) in a cursor.
_DIGITS = 19


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """Which events to list: each field that is set must match (see ``GET /nsqbox/journal``).

    ``limit`` is per node (None: the node's default); ``cursor`` is a previous result's
    ``next`` ("" for the first page).
    """

    msg_id: str = ""
    topic: str = ""
    channel: str = ""
    kinds: tuple[str, ...] = ()
    since: int = 0
    until: int = 0
    limit: int | None = None
    cursor: str = ""

    def params(self) -> dict[str, str]:
        """The node's query parameters (without ``after``)."""
        params: dict[str, str] = {}
        for name, value in (("id", self.msg_id), ("topic", self.topic), ("channel", self.channel)):
            if value:
                params[name] = value
        if self.kinds:
            params["kind"] = ",".join(self.kinds)
        if self.since:
            params["since"] = str(self.since)
        if self.until:
            params["until"] = str(self.until)
        if self.limit is not None:
            params["limit"] = str(self.limit)
        return params


@dataclass(frozen=True, slots=True)
class TroublesQuery:
    """A channel's troubles or given-up messages, narrowed as nsqd's routes narrow them.

    None: the node's default. ``requeues``, ``held_ms`` and ``timed_out`` narrow troubles,
    ``attempts`` given-up messages.
    """

    topic: str
    channel: str
    limit: int | None = None
    body_bytes: int | None = None
    requeues: int | None = None
    held_ms: int | None = None
    timed_out: bool = False
    attempts: int | None = None

    def params(self, *, troubles: bool) -> dict[str, str]:
        """The node's query parameters for the troubles (or the given-up) route."""
        params = {"topic": self.topic, "channel": self.channel}
        named: tuple[tuple[str, int | None], ...] = (
            ("limit", self.limit),
            ("body_bytes", self.body_bytes),
        )
        if troubles:
            named += (("requeues", self.requeues), ("held_ms", self.held_ms))
            if self.timed_out:
                params["timed_out"] = "true"
        else:
            named += (("attempts", self.attempts),)
        params.update((name, str(value)) for name, value in named if value is not None)
        return params


@dataclass(slots=True)
class NodeJournal:
    """What one node answered: how much it listed, or why it listed nothing.

    ``supported`` is False for a node without the journal routes (real nsqd) or with its
    journal off; ``error`` then says :data:`NOT_SUPPORTED` or :data:`JOURNAL_OFF`, or the
    request's failure. ``recorded`` (entries ever recorded) and ``oldest`` (the first event
    number the ring still holds) are the node's for event queries; ``count`` is how many
    messages the channel has in trouble, or given up on (at the query's ``attempts`` or
    later), for those lists: ``more`` when it is more than were ``listed``.
    """

    node: str
    hostname: str = ""
    supported: bool = True
    listed: int = 0
    count: int = 0
    recorded: int = 0
    oldest: int = 0
    more: bool = False
    error: str = ""


@dataclass(slots=True)
class EventsResult:
    """Merged events in broker-time order, per-node reports, and the next page's cursor."""

    events: list[Event] = field(default_factory=list)
    nodes: list[NodeJournal] = field(default_factory=list)
    next: str | None = None
    errors: tuple[UpstreamError, ...] = ()


@dataclass(slots=True)
class TroublesResult:
    """A channel's messages in trouble on every node (oldest trouble first)."""

    messages: list[Trouble] = field(default_factory=list)
    nodes: list[NodeJournal] = field(default_factory=list)
    errors: tuple[UpstreamError, ...] = ()

    @property
    def count(self) -> int:
        """How many messages the channel has in trouble, over the nodes that said."""
        return sum(n.count for n in self.nodes)


@dataclass(slots=True)
class GivenUpResult:
    """A channel's given-up messages on every node (newest first)."""

    messages: list[GivenUp] = field(default_factory=list)
    nodes: list[NodeJournal] = field(default_factory=list)
    errors: tuple[UpstreamError, ...] = ()

    @property
    def count(self) -> int:
        """How many messages the channel's clients gave up on, over the nodes that said."""
        return sum(n.count for n in self.nodes)


def _report(producer: Producer, answer: object, errors: list[UpstreamError]) -> NodeJournal:
    """A node's report, its error said when ``answer`` is one."""
    report = NodeJournal(node=producer.http_address, hostname=producer.hostname)
    if not isinstance(answer, UpstreamError):
        return report
    code = error_code(answer) if answer.status == 404 else ""
    if code == "JOURNAL_OFF":
        report.supported, report.error = False, JOURNAL_OFF
    elif answer.status == 404:
        report.supported, report.error = False, NOT_SUPPORTED
    else:
        report.error = str(answer)
        errors.append(answer)
    return report


def _tagged(items: Iterable[_Item], node: str) -> Iterator[_Item]:
    """``items`` with their ``node`` said."""
    return (msgspec.structs.replace(item, node=node) for item in items)


async def _ask(
    info: ClusterInfo,
    asked: Sequence[tuple[Producer, dict[str, str]]],
    path: str,
    decoder: msgspec.json.Decoder[_Page],
) -> tuple[list[tuple[NodeJournal, _Page | None]], tuple[UpstreamError, ...]]:
    """Each producer's report and decoded answer to ``path`` with its parameters, in order
    (None for a node that did not answer), and the failures that are errors."""

    async def fetch(item: tuple[Producer, dict[str, str]]) -> _Page:
        node = item[0].http_address
        body = await info.get(node, path, item[1])
        try:
            return decode_peer_json(body, decoder)
        except PeerJSONError as exc:
            raise UpstreamError(node, path, f"bad response - {exc}") from exc

    answers = await gather(asked, fetch)
    errors: list[UpstreamError] = []
    replies = [
        (_report(producer, answer, errors), None if isinstance(answer, UpstreamError) else answer)
        for (producer, _), answer in zip(asked, answers, strict=True)
    ]
    return replies, tuple(errors)


async def read_events(
    info: ClusterInfo, producers: Sequence[Producer], query: JournalQuery
) -> EventsResult:
    """One merged page of the events ``query`` asks for, from ``producers``.

    With a ``query.cursor`` (a previous result's ``next``) only the nodes it names are
    asked, each after the last event of it already given. :class:`~.peek.InvalidCursor`
    if the cursor cannot be read (or its numbers are not ones).
    """
    cursors = decode_cursor(query.cursor) if query.cursor else None
    asked = [p for p in producers if cursors is None or p.http_address in cursors]
    base = query.params()
    params = []
    for producer in asked:
        node_params = dict(base)
        if cursors is not None:
            after = cursors[producer.http_address]
            if not (after.isascii() and after.isdigit() and len(after) <= _DIGITS):
                raise InvalidCursor(f"not an event number: {after[:32]!r}")
            node_params["after"] = after
        params.append(node_params)
    replies, errors = await _ask(
        info, list(zip(asked, params, strict=True)), JOURNAL_PATH, _events_decoder
    )
    merged = EventsResult(nodes=[report for report, _ in replies], errors=errors)
    pages: list[tuple[NodeJournal, _EventsPage, str]] = []
    for (report, page), node_params in zip(replies, params, strict=True):
        if page is None:
            continue
        report.recorded, report.oldest = page.recorded, page.oldest
        pages.append((report, page, node_params.get("after", "0")))
    # nothing past the earliest last event of a node with more: a later page would hold
    # events older than some given here
    horizon = min(
        (page.events[-1].time for _, page, _ in pages if page.next is not None and page.events),
        default=None,
    )
    following: dict[str, str] = {}
    for report, page, after in pages:
        given = [e for e in page.events if horizon is None or e.time <= horizon]
        report.listed = len(given)
        report.more = page.next is not None or len(given) < len(page.events)
        if report.more:
            following[report.node] = str(given[-1].n) if given else after
        merged.events.extend(_tagged(given, report.node))
    order = {report.node: i for i, report in enumerate(merged.nodes)}
    merged.events.sort(key=lambda e: (e.time, order[e.node], e.n))
    merged.next = encode_cursor(following)
    return merged


async def read_troubles(
    info: ClusterInfo, producers: Sequence[Producer], query: TroublesQuery
) -> TroublesResult:
    """A channel's messages in trouble on ``producers``, merged (oldest trouble first)."""
    params = query.params(troubles=True)
    replies, errors = await _ask(
        info, [(p, params) for p in producers], TROUBLES_PATH, _troubles_decoder
    )
    merged = TroublesResult(nodes=[report for report, _ in replies], errors=errors)
    for report, page in replies:
        if page is not None:
            report.count, report.listed = page.count, len(page.messages)
            report.more = page.count > len(page.messages)
            merged.messages.extend(_tagged(page.messages, report.node))
    merged.messages.sort(key=lambda m: m.since)
    return merged


async def read_given_up(
    info: ClusterInfo, producers: Sequence[Producer], query: TroublesQuery
) -> GivenUpResult:
    """A channel's given-up messages on ``producers``, merged (newest first)."""
    params = query.params(troubles=False)
    replies, errors = await _ask(
        info, [(p, params) for p in producers], GIVEN_UP_PATH, _given_up_decoder
    )
    merged = GivenUpResult(nodes=[report for report, _ in replies], errors=errors)
    for report, page in replies:
        if page is not None:
            report.listed = len(page.messages)
            # a node's own word, bounded: no fewer than it listed, no more than it may keep
            told = report.listed if page.count is None else page.count
            report.count = max(report.listed, min(told, _MOST_GIVEN_UP))
            report.more = report.count > report.listed
            merged.messages.extend(_tagged(page.messages, report.node))
    merged.messages.sort(key=lambda m: m.time, reverse=True)
    return merged
