"""Following the journal: the events recorded since a reader's last one (issue #33).

A :class:`Follower` is a cursor on one nsqd's journal: the number ``after`` of the last event
it handed out. A :meth:`Follower.read` decodes the ring's entries from that event's on
(:class:`~.journal_views.Reading` from an entry), at most :data:`ENTRIES` of them, hands out at
most ``limit`` events and moves the cursor past what it handed out, or past every entry it
decoded when fewer matched. The reading stays under way until all its entries' events are
handed out: the next reads go on with it (an entry's events at a time, the rest of the last
piece kept) instead of decoding its entries again, so a reader behind by many pieces pays
for each entry once. It holds no more than that reading (at most :data:`ENTRIES` entries, of
the ring's own objects): the ring is the only buffer, bounded by ``--journal-size``. A reader
slower than the traffic falls behind the ring's oldest entry; the next read then says how
many entries the ring let go of before it got to them (:attr:`Page.lost`), drops the reading
under way and goes on from the oldest one left. Reading costs the reader's task its time;
the publishers never wait for it.

A delivery's attempt is counted back from the message's attempts, when the reading was made,
over the deliveries read with it (:mod:`.journal_views`): a follower more than
:data:`ENTRIES` entries behind may show a delivery of a message delivered again since with
an attempt too high. A FIN's attempt is its delivery's: the follower keeps the deliveries it
has read, at most :data:`DELIVERIES` of them (the oldest forgotten first: a FIN whose
delivery was forgotten shows ``attempt: null``, as one whose delivery the ring dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .journal_views import EventFilter, Reading

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .journal import Journal
    from .message import Message

__all__ = ["DELIVERIES", "ENTRIES", "Follower", "Page"]

#: The most entries one read decodes: a follower far behind catches up in steps of this
#: many, each a bounded piece of work for the loop the publishers share.
ENTRIES: Final = 512
#: The most deliveries a follower remembers for the attempts of the FINs it reads next.
DELIVERIES: Final = 65_536
_LOW: Final = (1 << 32) - 1


@dataclass(slots=True)
class Page:
    """What one :meth:`Follower.read` found."""

    #: The events, oldest first (dicts as ``GET /nsqbox/journal`` lists them).
    events: list[dict[str, Any]] = field(default_factory=list)
    #: Entries (steps of batches, one event or more each) dropped by the ring before the
    #: follower read them.
    lost: int = 0
    #: With :attr:`lost`: the ``after`` the read went on from (before the oldest entry left).
    lost_until: int = 0


class Follower:
    """A cursor on ``journal`` for the events ``want`` matches.

    ``after`` is an event number (``n``) to go on after; None starts after the newest event
    recorded so far (only what comes next). An ``after`` past the newest entry (a number from
    the journal an nsqd had before it restarted) starts from the oldest entry held.
    """

    def __init__(self, journal: Journal, want: EventFilter, after: int | None = None) -> None:
        self.journal = journal
        self.want = want
        if after is None:
            after = journal.recorded << 32 | _LOW
        elif after >> 32 > journal.recorded:
            after = 0
        #: The number of the last event handed out (or passed over).
        self.after = after
        self._delivered: dict[tuple[str, bytes], Message] = {}
        self._last = 0
        #: The reading under way (its entries decoded and scanned once) and where it ends:
        #: the next read goes on with it while the ring still holds its entries.
        self._reading: Reading | None = None
        self._pieces: Iterator[list[dict[str, Any]]] | None = None
        #: What the last read left of the piece it took its last events from.
        self._rest: list[dict[str, Any]] = []
        self._newest = 0

    @property
    def _next_entry(self) -> int:
        """The number of the first entry that may hold an event after :attr:`after`."""
        entry = self.after >> 32
        return entry + 1 if self.after & _LOW == _LOW else entry

    @property
    def reading(self) -> bool:
        """Whether a reading is under way: the next read goes on with entries decoded
        already (it may find no more events in them) rather than decoding new ones."""
        return self._pieces is not None

    def pending(self) -> bool:
        """Whether the journal has recorded entries the follower has not read."""
        return self.journal.recorded >= self._next_entry

    def behind(self) -> int:
        """How many entries the journal has recorded that the follower has not read (those
        of a reading under way included)."""
        return max(self.journal.recorded - max(self._next_entry, 1) + 1, 0)

    def read(self, limit: int) -> Page:
        """The next events (at most ``limit``), and the entries lost since the last read."""
        journal = self.journal
        page = Page()
        journal.trim()
        oldest = journal.evicted + 1
        start = max(self._next_entry, 1)  # entries are numbered from 1
        if start < oldest:
            page.lost = oldest - start
            self.after = page.lost_until = (oldest - 1) << 32 | _LOW
            start = oldest
        reading, pieces = self._reading, self._pieces
        if page.lost or pieces is None or reading is None:
            newest = min(journal.recorded, start + ENTRIES - 1)
            if start > newest:
                return page
            count = newest - start + 1
            reading = Reading(journal, self.want, start, self._delivered, self._last, count)
            self._newest = newest
            self._reading = reading
            self._pieces = pieces = reading.pieces(self.after)
            self._rest = []
        after = self.after
        events = page.events
        limit = max(limit, 1)
        while True:
            piece = self._rest or next(pieces, [])
            self._rest = []
            if not piece:  # all read: go on after the last entry read, matched or not
                self.after = self._newest << 32 | _LOW
                self._pieces = None
                break
            if piece[0]["n"] <= after:  # numbers only grow: the first says
                piece = [event for event in piece if event["n"] > after]
            room = limit - len(events)
            if len(piece) >= room:
                events += piece[:room]
                self._rest = piece[room:]
                self.after = events[-1]["n"]
                break
            events += piece
        self._last = reading._last
        delivered = self._delivered
        if len(delivered) > DELIVERIES:
            for key in list(delivered)[: len(delivered) - DELIVERIES // 2]:
                del delivered[key]
        return page
