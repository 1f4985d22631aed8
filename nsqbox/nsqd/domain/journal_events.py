"""Building a reading's events: the dicts ``GET /nsqbox/journal`` lists (docs/journeys.md).

A :class:`~.journal_views.Reading` has found what its entries say together (each
delivery's attempt and lease, what each FIN finished); these functions turn one entry into
its events. The kinds a trace sees most (publishes, deliveries, FINs) are built a run of
an entry's messages at a time (:data:`BUILD`): what stays the same over the run (who, the
lease's figures) is worked out once and each event is one dict literal. Any other kind, or
a filter on an id or a client, goes through :func:`one_event`, one message at a time; both
give the same dicts, keys in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .journal import (
    DEFERRED,
    DELIVERED,
    DROPPED,
    FINISHED,
    KINDS,
    PUBLISHED,
    QUEUED,
    REQUEUED,
    TIMED_OUT,
    TOUCHED,
    Entry,
    Journal,
    Run,
)
from .journal_lists import who_doc

if TYPE_CHECKING:
    from .message import Lease, Message

__all__ = [
    "BUILD",
    "Reading",
    "client_of",
    "delivered",
    "finished",
    "ids_in",
    "ids_of",
    "msgs_of",
    "one_event",
    "published",
]

Doc = dict[str, Any]

_ID = 16


class Reading(Protocol):
    """What a :class:`~.journal_views.Reading` has found that its events show."""

    journal: Journal
    #: each delivery's attempt, by event number
    attempts: dict[int, int]
    #: the lease of each delivery read back from its message, by event number
    sent: dict[int, Lease]
    #: the last delivery of each (channel, id) met so far
    delivered: dict[tuple[str, bytes], Message]

    def who(self, client: int) -> Doc:
        """Who ``client`` was (:func:`~.journal_lists.who_doc`)."""


def msgs_of(entry: Entry) -> list[Message]:
    """The messages an entry refers to (a list, whatever it holds)."""
    refs = entry.refs
    return refs if refs.__class__ is list else [refs]


def ids_in(entry: Entry) -> list[bytes]:
    """The ids of the messages an entry is about."""
    refs = entry.refs
    if entry.kind == FINISHED:
        return list(refs) if refs.__class__ is tuple else [refs]
    if refs.__class__ is Run:  # a batch kept as its first message and how many
        return refs.ids()
    return [m.data[:_ID] for m in msgs_of(entry)]


def published(
    reading: Reading, entry: Entry, ids: list[bytes], time: int, after: int, out: list[Doc]
) -> None:
    """A publish's events (what :func:`one_event` makes of them, a dict literal each)."""
    refs = entry.refs
    run = refs.__class__ is Run
    tail: Doc = {}
    if entry.a.__class__ is not tuple:
        batch = run or (len(ids) > 1 and not entry.pubs)
        tail["via"] = "DPUB" if entry.b else ("MPUB" if batch else "PUB")
    source = entry.a
    tail.update(
        reading.who(source)
        if source.__class__ is int and source
        else _source(reading.journal, source)
    )
    if entry.b:
        tail["defer_ms"] = round(entry.b * 1000)
    msgs = [] if run else msgs_of(entry)
    size = refs.size if run else 0
    topic, channel, n = entry.topic, entry.channel, entry.first
    for i, msg_id in enumerate(ids):
        if n + i <= after:
            continue
        if not run:
            size = len(msgs[i].data) - _ID
        out.append(
            {
                "n": n + i,
                "time": time,
                "kind": "published",
                "topic": topic,
                "channel": channel,
                "id": msg_id.decode("ascii", "replace"),
                "size": size,
                **tail,
            }
        )


def delivered(
    reading: Reading, entry: Entry, ids: list[bytes], time: int, after: int, out: list[Doc]
) -> None:
    """A delivery's events (as :func:`published`)."""
    topic, channel, n = entry.topic, entry.channel, entry.first
    attempts, sent = reading.attempts, reading.sent
    lease = entry.a
    who: Doc = {}
    timeout_ms = deadline = 0
    last: Lease | None = None
    read_back = lease is None
    for i, msg_id in enumerate(ids, n):
        if i <= after:
            continue
        if read_back:  # read back: each message's own lease
            lease = sent.get(i)
            if lease is None:
                continue  # not sent on at once
        if lease != last:  # the same figures as the last one's (a batch's): the same fields
            last = lease
            who = reading.who(lease[0])
            timeout_ms = round((lease[2] - lease[1]) * 1000)
            deadline = time + round((lease[2] - lease[1]) * 1e9)
        out.append(
            {
                "n": i,
                "time": time,
                "kind": "delivered",
                "topic": topic,
                "channel": channel,
                "id": msg_id.decode("ascii", "replace"),
                **who,
                "attempt": attempts.get(i),
                "timeout_ms": timeout_ms,
                "deadline": deadline,
            }
        )


def finished(
    reading: Reading, entry: Entry, ids: list[bytes], time: int, after: int, out: list[Doc]
) -> None:
    """A run of FINs' events (as :func:`published`)."""
    topic, channel, n = entry.topic, entry.channel, entry.first
    who = reading.who(entry.a)
    delivered = reading.delivered
    published = since = None
    for i, msg_id in enumerate(ids, n):
        if i <= after:
            continue
        delivery = delivered.get((channel, msg_id))
        if delivery is not None and delivery.timestamp != published:
            published = delivery.timestamp
            since = round((time - published) / 1e6, 3)
        out.append(
            {
                "n": i,
                "time": time,
                "kind": "finished",
                "topic": topic,
                "channel": channel,
                "id": msg_id.decode("ascii", "replace"),
                **who,
                "attempt": None if delivery is None else delivery.attempts,
                "since_publish_ms": None if delivery is None else since,
            }
        )


def client_of(reading: Reading, entry: Entry, i: int) -> int:
    """The client of ``entry``'s ``i``-th event (0: none)."""
    kind = entry.kind
    if kind == DELIVERED:
        lease = reading.sent[entry.first + i] if entry.a is None else entry.a
        return lease[0]
    return _client(entry, i)


def _base(n: int, time: int, kind: str, topic: str, channel: str, msg_id: bytes) -> Doc:
    return {
        "n": n,
        "time": time,
        "kind": kind,
        "topic": topic,
        "channel": channel,
        "id": msg_id.decode("ascii", "replace"),
    }


def one_event(reading: Reading, entry: Entry, i: int, msg_id: bytes, time: int, n: int) -> Doc:
    """The event ``n`` of ``entry`` (its ``i``-th message, ``msg_id``), any kind."""
    journal = reading.journal
    kind = entry.kind
    doc = _base(n, time, KINDS[kind], entry.topic, entry.channel, msg_id)
    if kind == PUBLISHED:
        refs = entry.refs
        run = refs.__class__ is Run
        doc["size"] = refs.size if run else len(msgs_of(entry)[i].data) - _ID
        if entry.a.__class__ is not tuple:
            batch = run or (len(ids_of(entry)) > 1 and not entry.pubs)
            doc["via"] = "DPUB" if entry.b else ("MPUB" if batch else "PUB")
        doc.update(_source(journal, entry.a))
        if entry.b:
            doc["defer_ms"] = round(entry.b * 1000)
    elif kind == QUEUED:
        doc["to"] = "disk"
    elif kind == DELIVERED:
        lease = reading.sent[n] if entry.a is None else entry.a
        doc.update(reading.who(lease[0]))
        doc["attempt"] = reading.attempts.get(n)
        doc["timeout_ms"] = round((lease[2] - lease[1]) * 1000)
        doc["deadline"] = time + round((lease[2] - lease[1]) * 1e9)
    elif kind == FINISHED:
        doc.update(reading.who(entry.a))
        delivery = reading.delivered.get((entry.channel, msg_id))
        doc["attempt"] = None if delivery is None else delivery.attempts
        doc["since_publish_ms"] = (
            None if delivery is None else round((time - delivery.timestamp) / 1e6, 3)
        )
    elif kind == TOUCHED:
        doc.update(reading.who(entry.a))
        doc["timeout_left_ms"] = round(entry.b[0] * 1000)
    elif kind == REQUEUED:
        doc.update(reading.who(entry.a))
        delay, held, _ = entry.b
        doc["delay_ms"] = round(delay * 1000)
        doc["held_ms"] = round(held * 1000, 3)
    elif kind == TIMED_OUT:
        lease = entry.a[i]
        doc.update(reading.who(lease[0]))
        doc["held_ms"] = round((entry.now - lease[1]) * 1000, 3)
    elif kind == DROPPED:
        doc["why"] = entry.a
        doc["on_disk"] = entry.b
    elif kind == DEFERRED:
        doc["delay_ms"] = round(entry.a * 1000)
    return doc


def ids_of(entry: Entry) -> list[Any]:
    """The messages (or, for a FIN, the ids) an entry is about."""
    return ids_in(entry) if entry.kind == FINISHED else msgs_of(entry)


def _source(journal: Journal, source: object) -> Doc:
    if isinstance(source, tuple):  # HTTP: (remote address, user agent)
        return {"via": "HTTP", "remote_address": source[0], "user_agent": source[1]}
    if isinstance(source, int) and source:
        return who_doc(journal, source)
    return {"via": "in-process"}


def _client(entry: Entry, i: int) -> int:
    kind = entry.kind
    if kind in (FINISHED, TOUCHED, REQUEUED):
        return entry.a  # type: ignore[no-any-return]
    if kind == TIMED_OUT:
        return entry.a[i][0]  # type: ignore[no-any-return]
    if kind == PUBLISHED and isinstance(entry.a, int):
        return entry.a
    return 0


#: The kinds whose events a reading builds a run at a time when the filter leaves every
#: message of a matching entry in (no id, no client).
BUILD: dict[int, Callable[[Reading, Entry, list[bytes], int, int, list[Doc]], None]] = {
    PUBLISHED: published,
    DELIVERED: delivered,
    FINISHED: finished,
}
