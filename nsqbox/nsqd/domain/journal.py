"""The journal: what happened to each message, in broker time (issue #33).

A bounded ring of *entries*, each one event of a batch of messages, recorded where the code
already works per batch: an MPUB's or a PUB's publish, a topic's fan-out, a delivery batch,
a run of FINs, the timeouts of one scan. Recording appends one entry that refers to objects
that exist anyway (the batch's :class:`~.message.Message` list, the FIN run's id list, a
delivery's lease tuple) and builds nothing per message; :mod:`.journal_views` turns an
entry into one event per message when the journal is read.

An entry is a :class:`Published` or a :class:`Step`: structs the garbage collector does not
track (as :class:`~.message.Message`), so recording never makes the collector run, and
the ring it holds, however long, costs a collection nothing. The ring is a run of
*chunks*: what was recorded between two calls of :meth:`Journal.trim` (every queue scan)
is one list, whose bytes are counted as it is recorded (a running total, not a sum over
its entries when it closes); the ring drops whole chunks from its old end (and the
oldest part of one) while it holds more than ``size`` entries (``--journal-size``) or
:data:`ENTRY_BYTES` of the messages they refer to, so its cost per entry is a step of C
loops.

The messages whose delivery went wrong (requeued or timed out) are also kept apart, bodies
and all, until finished or dropped (:class:`Trouble`, at most :data:`TROUBLE_BYTES` of
bodies); one finished after such failures has been *given up* on and stays in
:attr:`Journal.given_up` (at most :data:`GIVEN_UP_BYTES` of bodies), so it can be shown
and published again whatever the ring has dropped since.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import chain, islice
from operator import attrgetter
from secrets import token_hex
from typing import TYPE_CHECKING, Any, Final

from .journal_entries import (
    Entry,
    GivenUp,
    Published,
    Run,
    Step,
    Trouble,
    Who,
    http_agent,
    ids_run,
    run_of,
)

if TYPE_CHECKING:
    from .message import Lease, Message

__all__ = [
    "DEFAULT_JOURNAL_SIZE",
    "ENTRY_BYTES",
    "GIVEN_UP_BYTES",
    "KINDS",
    "TROUBLE_BYTES",
    "Entry",
    "GivenUp",
    "Journal",
    "Published",
    "Run",
    "Step",
    "Trouble",
]

#: ``--journal-size``'s default, in entries (events of batches): many minutes of a test's
#: or a development box's traffic, a second or so of a benchmark's; about 10 MB besides
#: the messages it keeps alive, which :data:`ENTRY_BYTES` bounds.
DEFAULT_JOURNAL_SIZE: Final = 100_000
#: The most message bytes the ring's entries may keep alive (bodies, and what a message
#: costs besides); past it the oldest entries go, whatever the number of events.
ENTRY_BYTES: Final = 64 * 1024 * 1024
#: The most body bytes kept for messages in trouble (requeued or timed out, not finished).
TROUBLE_BYTES: Final = 16 * 1024 * 1024
#: The most body bytes kept for messages given up on, and the most such messages.
GIVEN_UP_BYTES: Final = 16 * 1024 * 1024
GIVEN_UP_COUNT: Final = 10_000
#: Clients whose identity (address, user agent, hostname) the journal remembers.
MAX_CLIENTS: Final = 10_000

#: A message's id and body (a C call: a batch's sizes summed without a Python loop).
_DATA: Final = attrgetter("data")

# The kinds of event, as the journal numbers them (KINDS names them).
PUBLISHED, QUEUED, DELIVERED, TOUCHED, REQUEUED, TIMED_OUT = range(6)
FINISHED, DROPPED, DEFERRED, DUE = range(6, 10)


#: What a publish's entry is recorded under: its topic, and the channels it went to.
Key = tuple[str, tuple[str, ...] | None]


#: Each kind's name, by number: what ``/nsqbox/journal`` shows and filters on.
_NAMES = "published queued delivered touched requeued timed_out finished dropped deferred due"
KINDS: Final = tuple(_NAMES.split())


class Journal:
    """One nsqd's journal. ``wall_ns`` and ``now`` are broker wall time and the node's
    monotonic clock; ``clients`` is the node's live clients by id (who published or was
    delivered to is looked up there once)."""

    def __init__(
        self,
        size: int,
        *,
        wall_ns: Callable[[], int],
        now: Callable[[], float],
        clients: dict[int, Any],
        entry_bytes: int = ENTRY_BYTES,
        trouble_bytes: int = TROUBLE_BYTES,
        given_up_bytes: int = GIVEN_UP_BYTES,
    ) -> None:
        self.size = size
        #: This journal's name (a new one each start): its event numbers mean nothing to
        #: another journal's readers, such as a stream following the node before a restart.
        self.id = token_hex(8)
        self.entry_bytes = entry_bytes
        self.trouble_bytes = trouble_bytes
        self.given_up_bytes = given_up_bytes
        self.wall_ns = wall_ns
        self.now = now
        self._clients = clients
        #: The ring's closed chunks, oldest first: ``[entries (a tuple), the bytes of those
        #: still held, the first still held]`` (a chunk's head goes before the chunk does).
        self._chunks: deque[list[Any]] = deque()
        #: What was recorded since the last :meth:`trim`: the chunk it closes next (one
        #: list for good, emptied by each trim, so callers may keep its ``append``).
        self.open: list[Published | Step] = []
        #: Message bytes the open chunk's entries keep alive: added to as they are recorded
        #: (whoever appends to :attr:`open` adds the entry's ``nbytes`` here).
        self.open_bytes = 0
        self._held = 0  #: entries in the closed chunks
        self.evicted = 0  #: entries the ring has let go of (the oldest held is the next)
        self.nbytes = 0  #: message bytes the closed chunks' entries keep alive
        #: broker wall ns = monotonic seconds * 1e9 + this, fixed on first use (a manual
        #: clock moves both alike): every read then gives an event the same time
        self._offset: int | None = None
        #: Who publishes from which entry on: ``(entry number, source)``, oldest first.
        self.sources: deque[tuple[int, object]] = deque([(1, 0)])
        #: Who publishes next (a TCP client's id, an HTTP request's (address, user agent),
        #: 0: this process).
        self.source: object = 0
        #: The headers of the HTTP request that is :attr:`source` (None: it is not HTTP).
        self.http_headers: object = None
        #: The clients seen, by id: who they were when first seen.
        self.who: dict[int, Who] = {}
        #: Messages in trouble, by (topic, channel), then by id.
        self.troubles: dict[tuple[str, str], dict[bytes, Trouble]] = {}
        self.trouble_held = 0
        self.given_up: deque[GivenUp] = deque()
        self.given_up_held = 0

    def append(self, entry: Published | Step) -> None:
        """Record one entry (a :class:`Published` or a :class:`Step`), counting its bytes."""
        self.open.append(entry)
        self.open_bytes += entry.nbytes

    def published(
        self, key: Key, msgs: list[Message], bodies: list[bytes], size: int, defer: float,
        packed: bytes = b"", lined: bool = False,
    ) -> None:  # fmt: skip
        """A topic published an MPUB's ``msgs`` (``size`` bytes of ``bodies``) under
        ``key``: a new entry, its first message and sizes when they are a run (see
        :func:`~.journal_entries.run_of`; ``packed`` and ``lined``: the bodies as sent, if
        known), else the list. The caller adds the bytes to :attr:`open_bytes`. A PUB's
        entry its topic appends itself, without a call: ``Published(key, refs, defer, size,
        True)``, ``refs`` its message, or the list of a run of PUBs (a topic's
        :meth:`~.topic.Topic.put_each`) that the run's later PUBs join."""
        self.open.append(Published(key, run_of(msgs, bodies, size, packed, lined), defer, size))

    def wall_of(self, now: float) -> int:
        """Broker wall time (ns) of the node's monotonic ``now`` (seconds)."""
        if self._offset is None:
            self._offset = self.wall_ns() - round(self.now() * 1e9)
        return round(now * 1e9) + self._offset

    @property
    def recorded(self) -> int:
        """Entries ever recorded (the newest one's number)."""
        return self.evicted + self._held + len(self.open)

    @property
    def entries(self) -> Iterator[Published | Step]:
        """The ring's entries, oldest first (what :meth:`trim` left, then what came since)."""
        held = (islice(chunk[0], chunk[2], None) for chunk in self._chunks)
        return chain(chain.from_iterable(held), self.open)

    def entries_from(self, skip: int) -> Iterator[Published | Step]:
        """The ring's entries from the ``skip``-th held one on, oldest first: found from the
        newest end, so a reader of the ring's tail (a follower) pays for the chunks it
        reads, not for the whole ring."""
        opened = self.open
        need = self._held + len(opened) - max(skip, 0)
        if need <= len(opened):
            return iter(opened[len(opened) - max(need, 0) :])
        need -= len(opened)
        pieces = []
        for chunk in reversed(self._chunks):
            entries, offset = chunk[0], chunk[2]
            held = len(entries) - offset
            if held >= need:
                pieces.append(islice(entries, len(entries) - need, None))
                break
            pieces.append(islice(entries, offset, None))
            need -= held
        return chain(chain.from_iterable(reversed(pieces)), opened)

    def __len__(self) -> int:
        """Entries the ring holds."""
        return self._held + len(self.open)

    # -- the ring ------------------------------------------------------------
    def trim(self) -> None:
        """Close the chunk recorded since the last call (its bytes already counted), then drop the
        oldest entries while the ring holds more than ``size`` entries or ``entry_bytes``
        of messages (the newest entry stays, whatever its size).

        Recording only appends an entry (the hot path's whole cost); this runs every queue
        scan and before each read, so the ring passes its bound by at most what one queue
        scan interval records. Its work per entry is a step of C loops.
        """
        if self.open:
            chunk = tuple(self.open)  # untracked once the collector has seen it
            self.open.clear()
            nbytes = self.open_bytes
            self.open_bytes = 0
            self._chunks.append([chunk, nbytes, 0])
            self._held += len(chunk)
            self.nbytes += nbytes
        self._drop(self._held - self.size)
        if self.nbytes > self.entry_bytes and self._held > 1:
            self._drop_bytes()
        sources = self.sources
        while len(sources) > 1 and sources[1][0] <= self.evicted + 1:
            sources.popleft()  # the publisher of the oldest entry stays

    def _drop(self, count: int) -> None:
        """Let the ``count`` oldest entries go: whole chunks, then the head of one (its
        bytes the chunk's shared out evenly: no walk over entries; the head is freed with
        the rest of its chunk, at most one queue scan later)."""
        chunks = self._chunks
        while count > 0 and chunks:
            chunk = chunks[0]
            entries: tuple[Any, ...] = chunk[0]
            live = len(entries) - chunk[2]
            if count >= live:
                chunks.popleft()
                gone, nbytes = live, chunk[1]
            else:
                gone = count
                nbytes = chunk[1] * count // live
                chunk[1] -= nbytes
                chunk[2] += count
            self._held -= gone
            self.nbytes -= nbytes
            self.evicted += gone
            count -= gone

    def _drop_bytes(self) -> None:
        """Drop the oldest entries until the rest keep at most ``entry_bytes`` alive: whole
        chunks, then of the oldest the share of its entries its excess bytes are of its
        bytes (its entries taken as alike: no walk over them; the newest entry stays)."""
        chunks = self._chunks
        while len(chunks) > 1 and self.nbytes - chunks[0][1] >= self.entry_bytes:
            self._drop(len(chunks[0][0]) - chunks[0][2])
        excess = self.nbytes - self.entry_bytes
        if excess > 0:
            chunk = chunks[0]
            live = len(chunk[0]) - chunk[2]
            share = -(-live * excess // chunk[1]) if chunk[1] > 0 else live
            count = min(share, self._held - 1)
            if count > 0:
                self._drop(count)

    def _seen(self, client_id: int, client: Any) -> None:
        """Remember who ``client_id`` is, the first time it shows."""
        who = self.who
        if len(who) >= MAX_CLIENTS:
            del who[next(iter(who))]
        who[client_id] = Who.of(client)

    def seen(self, client: Any) -> None:
        """Remember who ``client`` (a TCP connection) is, unless the journal knows it."""
        if client.id not in self.who:
            self._seen(client.id, client)

    def publisher(self, client: Any) -> None:
        """``client`` (a TCP connection) publishes what comes next (once per command or run
        of PUBs; recorded only when the publisher changes)."""
        if self.source != client.id:
            if client.id not in self.who:
                self._seen(client.id, client)
            self.source = client.id
            self.http_headers = None
            self.sources.append((self.recorded + 1, client.id))

    def publisher_http(self, remote: str, headers: tuple[tuple[bytes, bytes], ...]) -> None:
        """An HTTP request (its remote address and headers) publishes what comes next, as
        ``(remote, user agent)`` (recorded only when that changes). A route may skip the
        call while ``headers`` is :attr:`http_headers`: the server hands a headers object
        to one connection's requests only (those with the same head)."""
        self.http_headers = headers
        source = (remote, http_agent(headers))
        if self.source != source:
            self.source = source
            self.sources.append((self.recorded + 1, source))

    def publisher_in_process(self) -> None:
        """Code in this process publishes what comes next (a test handle)."""
        if self.source != 0:
            self.source = 0
            self.http_headers = None
            self.sources.append((self.recorded + 1, 0))

    # -- recording: topics -----------------------------------------------------
    def fanned_out(self, topic: str, msgs: list[Message], channels: tuple[str, ...]) -> None:
        """A topic handed messages it held to its ``channels``' memory."""
        self.append(Step(QUEUED, self.now(), topic, "", msgs, None, None, channels, 0))

    # -- recording: channels ---------------------------------------------------
    def queued_on_disk(self, topic: str, channel: str, msgs: list[Message], now: float) -> None:
        """A channel put its copies of ``msgs`` in its disk queue (its memory was full):
        the entry keeps the first and how many when it can, as a publish's does."""
        run = ids_run(msgs)
        refs: Any = msgs if run is None else run
        nbytes = len(msgs[0].data) if run is not None else sum(map(len, map(_DATA, msgs)))
        self.append(Step(QUEUED, now, topic, channel, refs, "disk", None, None, nbytes))

    def delivered(
        self, topic: str, channel: str, client: Any, lease: Lease, msgs: Any, nbytes: int
    ) -> None:
        """``msgs`` (a list, or one message) went to ``client`` under ``lease`` (``nbytes``
        of messages; 0 for one message: its own)."""
        self.seen(client)
        if not nbytes and msgs.__class__ is not list:
            nbytes = len(msgs.data)
        self.append(Step(DELIVERED, lease[1], topic, channel, msgs, lease, None, None, nbytes))

    def sent(self, topic: str, channel: str, msgs: list[Message]) -> None:
        """Of ``msgs``, a channel sent on at once those that now hold a client's lease (the
        rest were sampled out): an entry each, under its own lease (the channel's consumers
        are known from SUB)."""
        for msg in msgs:
            lease = msg.lease
            if lease[0]:
                size = len(msg.data)
                self.append(Step(DELIVERED, lease[1], topic, channel, msg, lease, None, None, size))

    def finished(
        self,
        topic: str,
        channel: str,
        client_id: int,
        msg_ids: list[bytes],
        taken: list[Message],
        now: float,
    ) -> None:
        """``client_id`` finished ``taken`` (``msg_ids``, unless some were refused) at
        ``now`` (the node's clock, as the turn read it)."""
        ids: Any  # a lone FIN's id; else a tuple of ids, untracked after one collection
        if len(taken) == len(msg_ids):
            ids = msg_ids[0] if len(msg_ids) == 1 else tuple(msg_ids)
        else:
            ids = tuple(m.id for m in taken)
            if len(ids) == 1:
                ids = ids[0]
        self.append(Step(FINISHED, now, topic, channel, ids, client_id, None, None, 0))
        if self.troubles:
            troubles = self.troubles.get((topic, channel))
            if troubles:
                self._gave_up(topic, channel, client_id, taken, troubles)

    def _add(
        self, kind: int, now: float, topic: str, channel: str, refs: Any, a: Any, b: Any
    ) -> None:
        msgs = refs if refs.__class__ is list else [refs]
        nbytes = sum(len(m.data) for m in msgs)
        self.append(Step(kind, now, topic, channel, refs, a, b, None, nbytes))

    def touched(
        self, topic: str, channel: str, msg: Message, client_id: int, now: float, before: Lease
    ) -> None:
        """``client_id`` restarted ``msg``'s timeout (its new deadline is in its lease; its
        lease ``before`` is kept: a delivery read back from the message needs it)."""
        self._add(TOUCHED, now, topic, channel, msg, client_id, (msg.deadline - now, before))

    def requeued(
        self, topic: str, channel: str, msg: Message, client_id: int, delay: float, now: float
    ) -> None:
        """``client_id`` sent ``msg`` back (REQ), to be queued after ``delay`` seconds."""
        held = now - msg.delivery_ts
        self._add(REQUEUED, now, topic, channel, msg, client_id, (delay, held, msg.lease))
        trouble = self._trouble(topic, channel, msg)
        if trouble is not None:
            trouble.requeues += 1
            trouble.last_client = client_id
            trouble.held_longest = max(trouble.held_longest, held)

    def timed_out(self, topic: str, channel: str, msgs: list[Message], now: float) -> None:
        """``msgs`` were not finished in time (each still holds the lease it timed out under)."""
        leases = [m.lease for m in msgs]
        self._add(TIMED_OUT, now, topic, channel, msgs, leases, None)
        for msg, lease in zip(msgs, leases, strict=True):
            trouble = self._trouble(topic, channel, msg)
            if trouble is not None:
                trouble.timeouts += 1
                trouble.last_client = lease[0]
                trouble.held_longest = max(trouble.held_longest, now - lease[1])

    def deferred(self, topic: str, channel: str, msg: Message, delay: float, now: float) -> None:
        """A DPUB's copy of ``msg`` waits ``delay`` seconds in a channel."""
        self._add(DEFERRED, now, topic, channel, msg, delay, None)

    def due(self, topic: str, channel: str, msgs: list[Message], now: float) -> None:
        """``msgs``' deferral (a DPUB's, a REQ's delay) ended: they are queued."""
        self._add(DUE, now, topic, channel, msgs, None, None)

    def dropped(
        self, topic: str, channel: str, msgs: list[Message], why: str, on_disk: int
    ) -> None:
        """A delete or an empty dropped ``msgs`` (the newest ``size`` of them are listed) and
        ``on_disk`` more from the disk queue, which are counted, not listed."""
        if len(msgs) > self.size:
            msgs = msgs[-self.size :]
        if msgs or on_disk:
            self._add(DROPPED, self.now(), topic, channel, msgs, why, on_disk)
        gone = self.troubles.pop((topic, channel), None) if channel else None
        if gone:  # a channel's messages in trouble went with it
            self.trouble_held -= sum(len(t.data) for t in gone.values())

    # -- troubles and the given up -------------------------------------------------
    def _trouble(self, topic: str, channel: str, msg: Message) -> Trouble | None:
        """The trouble record of ``msg`` in this channel, made on its first failure (None
        when its body cannot be kept)."""
        key = (topic, channel)
        held = self.troubles.get(key)
        if held is None:
            held = self.troubles[key] = {}
        msg_id = msg.data[:16]
        trouble = held.get(msg_id)
        if trouble is None:
            if len(msg.data) > self.trouble_bytes:
                return None
            trouble = held[msg_id] = Trouble(msg.data, msg.timestamp, self.wall_ns())
            self.trouble_held += len(msg.data)
            while self.trouble_held > self.trouble_bytes:
                self._forget_oldest_trouble()
        return trouble

    def _forget_oldest_trouble(self) -> None:
        oldest: tuple[tuple[str, str], bytes, Trouble] | None = None
        for key, held in self.troubles.items():
            for msg_id, trouble in held.items():  # each dict's first is its oldest
                if oldest is None or trouble.since < oldest[2].since:
                    oldest = (key, msg_id, trouble)
                break
        if oldest is None:
            self.trouble_held = 0
            return
        key, msg_id, trouble = oldest
        del self.troubles[key][msg_id]
        self.trouble_held -= len(trouble.data)

    def _gave_up(
        self,
        topic: str,
        channel: str,
        client_id: int,
        taken: list[Message],
        troubles: dict[bytes, Trouble],
    ) -> None:
        now = self.wall_ns()
        for msg in taken:
            trouble = troubles.pop(msg.data[:16], None)
            if trouble is None:
                continue
            size = len(trouble.data)
            self.trouble_held -= size
            self.given_up.append(GivenUp(
                now, topic, channel, trouble.data, msg.timestamp, msg.attempts, client_id,
                trouble.requeues, trouble.timeouts,
            ))  # fmt: skip
            self.given_up_held += size
            while self.given_up and (
                self.given_up_held > self.given_up_bytes or len(self.given_up) > GIVEN_UP_COUNT
            ):
                self.given_up_held -= len(self.given_up.popleft().data)
        if not troubles:
            self.troubles.pop((topic, channel), None)
