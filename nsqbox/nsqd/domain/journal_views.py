"""Reading the journal: its entries decoded into events, and the views derived from it.

The journal records per batch and builds nothing per message (:mod:`.journal`); the
work of turning an entry into one event per message is done here, when somebody reads.
An event is a plain dict (what ``GET /nsqbox/journal`` answers); see docs/journeys.md
for every kind's fields.

A delivery's attempt number is not stored: a message's ``attempts`` only changes when it
is delivered again, and every later delivery is newer, hence still in the ring. Walking
the ring from its newest entry back, the last delivery of a message in a channel was at
its current ``attempts``, each earlier one at one less than the delivery after it.

A message the first channel of a publish (or of a topic's fan-out) sent on at once is not
recorded again: every other delivery is, so when its earliest recorded delivery there was
at attempt 2 or more (or none was recorded and it has been delivered), the one before
was that send. Its lease is the message's own, unless something replaced it since: the
earliest touch, requeue or timeout of it after the publish kept the lease it replaced.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from msgspec.structs import astuple

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
    Published,
    Run,
)
from .journal_lists import given_up_doc, troubles_doc, who_doc

if TYPE_CHECKING:
    from .message import Lease, Message

__all__ = ["EventFilter", "Reading", "events_page", "given_up_doc", "troubles_doc"]

Doc = dict[str, Any]

_ID = 16
#: An event's number: its entry's number times 2**32, plus its place in the entry.
_LOW = (1 << 32) - 1
#: Where the delivery a publish's entry holds is numbered in it: after the publish's events.
_SENT = 1 << 31


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events to list: every field that is set must match."""

    msg_id: bytes = b""
    topic: str = ""
    channel: str = ""
    kinds: frozenset[int] = frozenset()
    client: int = 0
    since: int = 0  #: broker wall ns, inclusive
    until: int = 0  #: broker wall ns, exclusive (0: no end)

    def entry_matches(self, entry: Entry) -> bool:
        """Whether ``entry``'s place fits: its topic, and its channel or (a publish or a
        topic's fan-out) one of the channels it copied its messages to."""
        if self.topic and entry.topic != self.topic:
            return False
        if not self.channel or entry.channel == self.channel:
            return True
        return entry.c is not None and self.channel in entry.c


def _msgs(entry: Entry) -> list[Message]:
    refs = entry.refs
    return refs if refs.__class__ is list else [refs]


def _ids(entry: Entry) -> list[bytes]:
    refs = entry.refs
    if entry.kind == FINISHED:
        return list(refs) if refs.__class__ is tuple else [refs]
    if refs.__class__ is Run:  # a batch kept as its first message and how many
        return refs.ids()
    return [m.data[:_ID] for m in _msgs(entry)]


def _entries(
    journal: Journal, base: int, skip: int = 0, count: int | None = None
) -> Iterator[Entry]:
    """The ring's entries as :class:`Entry`, a publish with who published it (``count`` of
    them, or all, from the ``skip``-th held one on)."""
    sources = list(journal.sources)
    at = 0
    source = sources[0][1]
    held = journal.entries_from(skip) if skip else journal.entries
    for i, raw in enumerate(islice(held, count), skip):
        number = base + i
        while at + 1 < len(sources) and sources[at + 1][0] <= number:
            at += 1
            source = sources[at][1]
        if raw.__class__ is Published:
            topic, channels = raw.key
            yield Entry(
                number << 32, PUBLISHED, None, topic, "", raw.refs, source, raw.defer, channels,
                raw.nbytes, raw.pubs,
            )  # fmt: skip
            if channels and not raw.defer:  # what its first channel sent on at once
                yield _sent_entry(number, topic, channels[0], raw.refs)
        else:
            entry = Entry(number << 32, *astuple(raw))
            yield entry
            if entry.kind == QUEUED and entry.c and not entry.channel:  # a fan-out: the same
                yield _sent_entry(number, entry.topic, entry.c[0], entry.refs)


def _sent_entry(number: int, topic: str, channel: str, refs: Any) -> Entry:
    """The deliveries a publish's or fan-out's first channel may have made at once: read
    back from the messages (``a`` None), numbered after the entry's own events."""
    if refs.__class__ is Run:  # an MPUB's: each one sent was recorded
        refs = []
    return Entry(number << 32 | _SENT, DELIVERED, None, topic, channel, refs, None, None, None, 0)


class _Reading:
    """One pass over the ring: what the entries say together (see the module docstring)."""

    def __init__(
        self,
        journal: Journal,
        want: EventFilter,
        start: int = 0,
        delivered: dict[tuple[str, bytes], Message] | None = None,
        last: int = 0,
        count: int | None = None,
    ) -> None:
        """Read ``count`` entries (None: all) of the ring from entry number ``start`` on (0:
        its oldest); ``delivered`` and ``last`` carry on from a reading of the entries
        before ``start`` (a follower's). A delivery's attempt is then counted back from the
        last entry read (see the module doc)."""
        self.journal = journal
        self.want = want
        journal.trim()
        base = journal.evicted + 1
        self.entries = list(_entries(journal, base, max(start - base, 0), count))
        #: each delivery's attempt, by event number
        self.attempts: dict[int, int] = {}
        #: (channel, id) of copies that did not wait in memory: sent on at once, deferred,
        #: or put on disk (a publish's or fan-out's implied "queued" is then not shown)
        self.not_in_memory: set[tuple[str, bytes]] = set()
        #: the last delivery of each (channel, id) met so far, for a FIN's attempt
        self.delivered: dict[tuple[str, bytes], Message] = {} if delivered is None else delivered
        #: the lease of each delivery read back from its message, by event number
        self.sent: dict[int, Lease] = {}
        #: the first such lease of each entry of them (by its number), for its time
        self.sent_first: dict[int, Lease] = {}
        self._last = last  #: the time of the last entry read
        self._scan()

    def _wanted(self, msg_id: bytes) -> bool:
        return not self.want.msg_id or msg_id == self.want.msg_id

    def _scan(self) -> None:
        later: dict[tuple[str, bytes], int] = {}
        #: the lease a message held before its earliest touch, requeue or timeout so far
        before: dict[tuple[str, bytes], Lease] = {}
        want = self.want
        for entry in reversed(self.entries):
            kind = entry.kind
            if not want.entry_matches(entry):
                continue
            if kind == DELIVERED and entry.a is None:
                self._scan_sent(entry, later, before)
            elif kind in (TOUCHED, REQUEUED, TIMED_OUT):
                for i, msg in enumerate(_msgs(entry)):
                    msg_id = msg.data[:_ID]
                    if self._wanted(msg_id):
                        lease = entry.a[i] if kind == TIMED_OUT else entry.b[-1]
                        before[entry.channel, msg_id] = lease
            elif kind == DELIVERED:
                msgs = _msgs(entry)
                for i in range(len(msgs) - 1, -1, -1):
                    msg_id = msgs[i].data[:_ID]
                    if not self._wanted(msg_id):
                        continue
                    key = (entry.channel, msg_id)
                    attempt = later.get(key)
                    attempt = msgs[i].attempts if attempt is None else attempt - 1
                    later[key] = attempt
                    self.attempts[entry.first + i] = attempt
                    if entry.refs.__class__ is not list:  # sent as it was published
                        self.not_in_memory.add(key)
            elif kind == DEFERRED or (kind == QUEUED and entry.channel):
                for msg_id in _ids(entry):
                    self.not_in_memory.add((entry.channel, msg_id))

    def _scan_sent(
        self,
        entry: Entry,
        later: dict[tuple[str, bytes], int],
        before: dict[tuple[str, bytes], Lease],
    ) -> None:
        """Which of a publish's messages its first channel sent on at once (see the module
        docstring), under which lease and at which attempt."""
        msgs = _msgs(entry)
        for i in range(len(msgs) - 1, -1, -1):
            msg = msgs[i]
            msg_id = msg.data[:_ID]
            if not self._wanted(msg_id):
                continue
            key = (entry.channel, msg_id)
            attempt = later.get(key)
            attempt = msg.attempts if attempt is None else attempt - 1
            if attempt < 1:
                continue
            later[key] = attempt
            self.attempts[entry.first + i] = attempt
            self.sent[entry.first + i] = self.sent_first[entry.first] = before.get(key, msg.lease)
            self.not_in_memory.add(key)

    def time(self, entry: Entry) -> int:
        """When ``entry`` happened, broker wall ns."""
        if entry.now is None and entry.kind == DELIVERED:  # sent at once: its first lease
            return self.journal.wall_of(self.sent_first[entry.first][1])
        if entry.now is None:  # a publish: its messages' timestamp
            refs = entry.refs
            return (refs.first if refs.__class__ is Run else _msgs(entry)[0]).timestamp
        return self.journal.wall_of(entry.now)

    def events(self, after: int) -> Iterator[Doc]:
        """Every event that matches, numbered after ``after``, oldest first."""
        want = self.want
        for entry in self.entries:
            if not want.entry_matches(entry):
                continue
            read_back = entry.kind == DELIVERED and entry.a is None
            if read_back and entry.first not in self.sent_first:
                continue  # none of them was sent on at once
            ids = _ids(entry)
            if entry.kind == DELIVERED:  # a FIN's attempt and publish time are its delivery's
                for i, (msg_id, msg) in enumerate(zip(ids, _msgs(entry), strict=True)):
                    if self._wanted(msg_id) and (not read_back or entry.first + i in self.sent):
                        self.delivered[entry.channel, msg_id] = msg
            if entry.first | _LOW <= after:
                continue
            # in ring order: a publish's time is its messages' timestamp, taken a little
            # after the turn's clock reading that the steps beside it carry
            time = self._last = max(self.time(entry), self._last)
            if time < want.since or (want.until and time >= want.until):
                continue
            yield from self._entry_events(entry, ids, time, after)

    def _entry_events(self, entry: Entry, ids: list[bytes], time: int, after: int) -> Iterator[Doc]:
        want = self.want
        kind = entry.kind
        n = entry.first
        own = kind != QUEUED or entry.channel  # a fan-out is only implied copies
        if own and (not want.kinds or kind in want.kinds):
            if not want.channel or entry.channel == want.channel:
                read_back = kind == DELIVERED and entry.a is None
                for i, msg_id in enumerate(ids):
                    if n + i <= after or not self._wanted(msg_id):
                        continue
                    if read_back and n + i not in self.sent:
                        continue  # not sent on at once
                    if want.client and self._client_of(entry, i) != want.client:
                        continue
                    yield self._event(entry, i, msg_id, time, n + i)
            if not ids and kind == DROPPED:  # only messages on disk: counted, not listed
                yield self._event(entry, 0, b"", time, n)
        if entry.c is None or (want.kinds and QUEUED not in want.kinds) or want.client:
            return
        # the copies a publish or a fan-out put straight into its channels' memory
        start = n + len(ids) if own else n
        for k, channel in enumerate(entry.c):
            if want.channel and channel != want.channel:
                continue
            for i, msg_id in enumerate(ids):
                number = start + k * len(ids) + i
                if number <= after or not self._wanted(msg_id):
                    continue
                if (channel, msg_id) in self.not_in_memory:
                    continue
                doc = self._base(number, time, "queued", entry.topic, channel, msg_id)
                doc["to"] = "memory"
                yield doc

    def _client_of(self, entry: Entry, i: int) -> int:
        kind = entry.kind
        if kind == DELIVERED:
            lease = self.sent[entry.first + i] if entry.a is None else entry.a
            return lease[0]
        return _client(entry, i)

    @staticmethod
    def _base(n: int, time: int, kind: str, topic: str, channel: str, msg_id: bytes) -> Doc:
        return {
            "n": n,
            "time": time,
            "kind": kind,
            "topic": topic,
            "channel": channel,
            "id": msg_id.decode("ascii", "replace"),
        }

    def _event(self, entry: Entry, i: int, msg_id: bytes, time: int, n: int) -> Doc:
        journal = self.journal
        kind = entry.kind
        doc = self._base(n, time, KINDS[kind], entry.topic, entry.channel, msg_id)
        if kind == PUBLISHED:
            refs = entry.refs
            run = refs.__class__ is Run
            doc["size"] = refs.size if run else len(_msgs(entry)[i].data) - _ID
            if entry.a.__class__ is not tuple:
                batch = run or (len(ids_of(entry)) > 1 and not entry.pubs)
                doc["via"] = "DPUB" if entry.b else ("MPUB" if batch else "PUB")
            doc.update(_source(journal, entry.a))
            if entry.b:
                doc["defer_ms"] = round(entry.b * 1000)
        elif kind == QUEUED:
            doc["to"] = "disk"
        elif kind == DELIVERED:
            lease = self.sent[n] if entry.a is None else entry.a
            doc.update(who_doc(journal, lease[0]))
            doc["attempt"] = self.attempts.get(n)
            doc["timeout_ms"] = round((lease[2] - lease[1]) * 1000)
            doc["deadline"] = time + round((lease[2] - lease[1]) * 1e9)
        elif kind == FINISHED:
            doc.update(who_doc(journal, entry.a))
            delivery = self.delivered.get((entry.channel, msg_id))
            doc["attempt"] = None if delivery is None else delivery.attempts
            doc["since_publish_ms"] = (
                None if delivery is None else round((time - delivery.timestamp) / 1e6, 3)
            )
        elif kind == TOUCHED:
            doc.update(who_doc(journal, entry.a))
            doc["timeout_left_ms"] = round(entry.b[0] * 1000)
        elif kind == REQUEUED:
            doc.update(who_doc(journal, entry.a))
            delay, held, _ = entry.b
            doc["delay_ms"] = round(delay * 1000)
            doc["held_ms"] = round(held * 1000, 3)
        elif kind == TIMED_OUT:
            lease = entry.a[i]
            doc.update(who_doc(journal, lease[0]))
            doc["held_ms"] = round((entry.now - lease[1]) * 1000, 3)
        elif kind == DROPPED:
            doc["why"] = entry.a
            doc["on_disk"] = entry.b
        elif kind == DEFERRED:
            doc["delay_ms"] = round(entry.a * 1000)
        return doc


#: One pass over the ring, from an entry on (what :mod:`.journal_follow` reads with).
Reading = _Reading


def ids_of(entry: Entry) -> list[Any]:
    """The messages (or, for a FIN, the ids) an entry is about."""
    return _ids(entry) if entry.kind == FINISHED else _msgs(entry)


def _source(journal: Journal, source: object) -> Doc:
    if isinstance(source, tuple):  # HTTP: (remote address, headers)
        remote, headers = source
        agent = next((v for k, v in headers if k.lower() == b"user-agent"), b"")
        return {
            "via": "HTTP",
            "remote_address": remote,
            "user_agent": agent.decode("utf-8", "replace"),
        }
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


def events_page(journal: Journal, want: EventFilter, after: int, limit: int) -> Doc:
    """The events matching ``want`` numbered after ``after``, oldest first, at most
    ``limit``; ``next`` is the ``after`` of the next page (None after the last)."""
    page: list[Doc] = []
    more = False
    for event in _Reading(journal, want).events(after):
        if event["n"] <= after:
            continue
        if len(page) >= limit:
            more = True
            break
        page.append(event)
    return {
        "size": journal.size,
        "recorded": journal.recorded,
        "oldest": journal.evicted + 1 << 32,
        "events": page,
        "next": page[-1]["n"] if more else None,
    }
