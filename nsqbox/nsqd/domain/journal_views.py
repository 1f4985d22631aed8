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
from .journal_events import BUILD, client_of, ids_in, msgs_of, one_event
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
        self._whos: dict[int, Doc] = {}  #: who each client was, as events show it
        self._scan()

    def _scan(self) -> None:
        later: dict[tuple[str, bytes], int] = {}
        #: the lease a message held before its earliest touch, requeue or timeout so far
        before: dict[tuple[str, bytes], Lease] = {}
        topic, channel, want_id = self.want.topic, self.want.channel, self.want.msg_id
        attempts, not_in_memory = self.attempts, self.not_in_memory
        for entry in reversed(self.entries):
            kind = entry.kind
            if kind in (FINISHED, PUBLISHED):
                continue  # nothing to count
            if topic and entry.topic != topic:
                continue
            if channel and entry.channel != channel and not (entry.c and channel in entry.c):
                continue
            if kind == DELIVERED and entry.a is None:
                self._scan_sent(entry, later, before)
            elif kind in (TOUCHED, REQUEUED, TIMED_OUT):
                for i, msg in enumerate(msgs_of(entry)):
                    msg_id = msg.data[:_ID]
                    if not want_id or msg_id == want_id:
                        lease = entry.a[i] if kind == TIMED_OUT else entry.b[-1]
                        before[entry.channel, msg_id] = lease
                        # what came after a delivery (a REQ's delay, its end) is not
                        # where the publish put the copy
                        not_in_memory.discard((entry.channel, msg_id))
            elif kind == DELIVERED:
                msgs = msgs_of(entry)
                one = entry.refs.__class__ is not list  # sent as it was published
                for i in range(len(msgs) - 1, -1, -1):
                    msg_id = msgs[i].data[:_ID]
                    if want_id and msg_id != want_id:
                        continue
                    key = (entry.channel, msg_id)
                    attempt = later.get(key)
                    attempt = msgs[i].attempts if attempt is None else attempt - 1
                    later[key] = attempt
                    attempts[entry.first + i] = attempt
                    if one:
                        not_in_memory.add(key)
                    else:  # taken from the queue: what came after it says nothing
                        not_in_memory.discard(key)
            elif kind == DEFERRED or (kind == QUEUED and entry.channel):
                for msg_id in ids_in(entry):
                    not_in_memory.add((entry.channel, msg_id))

    def _scan_sent(
        self,
        entry: Entry,
        later: dict[tuple[str, bytes], int],
        before: dict[tuple[str, bytes], Lease],
    ) -> None:
        """Which of a publish's messages its first channel sent on at once (see the module
        docstring), under which lease and at which attempt."""
        msgs = msgs_of(entry)
        channel, first, want_id = entry.channel, entry.first, self.want.msg_id
        attempts, sent, not_in_memory = self.attempts, self.sent, self.not_in_memory
        lease = None
        for i in range(len(msgs) - 1, -1, -1):
            msg = msgs[i]
            msg_id = msg.data[:_ID]
            if want_id and msg_id != want_id:
                continue
            key = (channel, msg_id)
            attempt = later.get(key)
            attempt = msg.attempts if attempt is None else attempt - 1
            if attempt < 1:
                continue
            later[key] = attempt
            attempts[first + i] = attempt
            lease = before.get(key) if before else None
            sent[first + i] = lease = msg.lease if lease is None else lease
            not_in_memory.add(key)
        if lease is not None:  # the earliest one's
            self.sent_first[first] = lease

    def time(self, entry: Entry) -> int:
        """When ``entry`` happened, broker wall ns."""
        if entry.now is None and entry.kind == DELIVERED:  # sent at once: its first lease
            return self.journal.wall_of(self.sent_first[entry.first][1])
        if entry.now is None:  # a publish: its messages' timestamp
            refs = entry.refs
            return (refs.first if refs.__class__ is Run else msgs_of(entry)[0]).timestamp
        return self.journal.wall_of(entry.now)

    def events(self, after: int) -> Iterator[Doc]:
        """Every event that matches, numbered after ``after``, oldest first."""
        for piece in self.pieces(after):
            yield from piece

    def pieces(self, after: int) -> Iterator[list[Doc]]:
        """:meth:`events`, an entry's at a time (never an empty list)."""
        want = self.want
        topic, channel, want_id = want.topic, want.channel, want.msg_id
        since, until = want.since, want.until
        sent, delivered = self.sent, self.delivered
        for entry in self.entries:
            if topic and entry.topic != topic:
                continue
            if channel and entry.channel != channel and not (entry.c and channel in entry.c):
                continue
            first = entry.first
            if entry.kind == DELIVERED:  # a FIN's attempt and publish time are its delivery's
                read_back = entry.a is None
                if read_back and first not in self.sent_first:
                    continue  # none of them was sent on at once
                ids = []
                on = entry.channel
                for i, msg in enumerate(msgs_of(entry)):
                    msg_id = msg.data[:_ID]
                    ids.append(msg_id)
                    if read_back:
                        if first + i in sent:  # only wanted ones were
                            delivered[on, msg_id] = msg
                    elif not want_id or msg_id == want_id:
                        delivered[on, msg_id] = msg
                if first | _LOW <= after:
                    continue
            elif first | _LOW <= after:
                continue
            else:
                ids = ids_in(entry)
            # in ring order: a publish's time is its messages' timestamp, taken a little
            # after the turn's clock reading that the steps beside it carry
            time = self._last = max(self.time(entry), self._last)
            if time < since or (until and time >= until):
                continue
            piece = self._entry_events(entry, ids, time, after)
            if piece:
                yield piece

    def _entry_events(self, entry: Entry, ids: list[bytes], time: int, after: int) -> list[Doc]:
        want = self.want
        kind = entry.kind
        n = entry.first
        out: list[Doc] = []
        own = kind != QUEUED or entry.channel  # a fan-out is only implied copies
        if own and (not want.kinds or kind in want.kinds):
            if not want.channel or entry.channel == want.channel:
                build = BUILD.get(kind)
                if build is not None and not want.msg_id and not want.client:
                    build(self, entry, ids, time, after, out)
                else:
                    self._own_events(entry, ids, time, after, out)
            if not ids and kind == DROPPED:  # only messages on disk: counted, not listed
                out.append(one_event(self, entry, 0, b"", time, n))
        if entry.c is None or (want.kinds and QUEUED not in want.kinds) or want.client:
            return out
        # the copies a publish or a fan-out put straight into its channels' memory
        start = n + len(ids) if own else n
        topic, want_id, not_in_memory = entry.topic, want.msg_id, self.not_in_memory
        for k, channel in enumerate(entry.c):
            if want.channel and channel != want.channel:
                continue
            for i, msg_id in enumerate(ids, start + k * len(ids)):
                if i <= after or (want_id and msg_id != want_id):
                    continue
                if (channel, msg_id) in not_in_memory:
                    continue
                out.append(
                    {
                        "n": i,
                        "time": time,
                        "kind": "queued",
                        "topic": topic,
                        "channel": channel,
                        "id": msg_id.decode("ascii", "replace"),
                        "to": "memory",
                    }
                )
        return out

    def _own_events(
        self, entry: Entry, ids: list[bytes], time: int, after: int, out: list[Doc]
    ) -> None:
        """An entry's own events, one by one, whatever the filter."""
        want = self.want
        n = entry.first
        read_back = entry.kind == DELIVERED and entry.a is None
        for i, msg_id in enumerate(ids):
            if n + i <= after or not (not want.msg_id or msg_id == want.msg_id):
                continue
            if read_back and n + i not in self.sent:
                continue  # not sent on at once
            if want.client and client_of(self, entry, i) != want.client:
                continue
            out.append(one_event(self, entry, i, msg_id, time, n + i))

    def who(self, client: int) -> Doc:
        """:func:`who_doc`, once per client a reading."""
        who = self._whos.get(client)
        if who is None:
            who = self._whos[client] = who_doc(self.journal, client)
        return who


#: One pass over the ring, from an entry on (what :mod:`.journal_follow` reads with).
Reading = _Reading


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
