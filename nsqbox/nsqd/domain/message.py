"""The in-memory message and the snowflake ID factory."""

from __future__ import annotations

import struct
import time
from typing import Final

import msgspec

from ...wire.message import MESSAGE_HEADER, MIN_VALID_MSG_LENGTH, MSG_ID_LENGTH

# Snowflake layout (nsqd/guid.go): 41 bits of ~ms time, 10 bits node, 12 bits sequence.
_NODE_ID_SHIFT = 12
_TIMESTAMP_SHIFT = 22
_SEQUENCE_MASK = (1 << 12) - 1
_TWEPOCH = 1288834974288
#: The last 3 hex digits of an id (its 12 sequence bits), made once: an id is the tick's
#: 13 digits plus one of these, which costs half of formatting all 16 digits.
_HEX_SEQUENCES: Final = [b"%03x" % seq for seq in range(_SEQUENCE_MASK + 1)]


#: Who holds a message and until when: ``(client id, delivered at, deadline)``.
Lease = tuple[int, float, float]
#: The lease of a message that is neither in flight nor deferred.
NO_LEASE: Final[Lease] = (0, 0.0, 0.0)


class Message(msgspec.Struct, gc=False, eq=False):
    """One message as held by a topic or a channel.

    ``data`` is the 16-byte id followed by the body: the tail of a delivery frame
    and of a disk record, so a message costs one bytes object, and a frame is a
    header plus ``data``. Each channel holds its own Message (attempts, owner
    and deadline are per channel) sharing the same ``data``.

    A struct the garbage collector does not track (``gc=False``; it only ever
    refers to bytes, numbers and a tuple of numbers, so it can be in no cycle): with a million
    messages queued, every collection would otherwise walk them all, and
    creating them cost four times as much.
    """

    data: bytes
    timestamp: int  # wall clock, ns (what clients see)
    attempts: int = 0
    #: In flight: the client's id, when it was delivered and when it times out (server
    #: clock, seconds), one tuple shared by a delivery's batch. Deferred: the deadline.
    #: At the topic, before fan-out: a DPUB's delay in seconds (0.0 for none).
    #: Four fields, not six: 16 bytes less per message held.
    lease: Lease = NO_LEASE

    @property
    def client_id(self) -> int:
        """The client it is in flight to (0: none)."""
        return self.lease[0]

    @property
    def delivery_ts(self) -> float:
        """When it was delivered (server clock, seconds)."""
        return self.lease[1]

    @property
    def deadline(self) -> float:
        """When it times out (in flight) or is due (deferred); a DPUB's delay at the topic."""
        return self.lease[2]

    @property
    def id(self) -> bytes:
        """The 16 ASCII hex bytes of the message id."""
        return self.data[:MSG_ID_LENGTH]

    @property
    def body(self) -> bytes:
        """The message body."""
        return self.data[MSG_ID_LENGTH:]

    def copy(self) -> Message:
        """A fresh copy for another channel (same id, body, timestamp; nsqd does the same)."""
        return Message(self.data, self.timestamp, self.attempts, self.lease)

    @classmethod
    def decode(cls, data: bytes) -> Message:
        """A message from its encoding (:func:`encode_messages`' for one)."""
        if len(data) < MIN_VALID_MSG_LENGTH:
            raise ValueError(f"invalid message buffer size ({len(data)})")
        timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
        return cls(data[10:], timestamp, attempts)

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, attempts={self.attempts}, body={self.body[:32]!r})"


class GUIDFactory:
    """Snowflake message IDs, hex-encoded into 16 ASCII bytes; one factory per topic.

    nsqd sleeps when 4096 IDs were taken in one ~1 ms tick; this factory borrows
    the next tick instead, which keeps IDs unique and increasing without waiting.
    An id is its tick's 13 hex digits (formatted once per tick) and 3 from a table.
    """

    __slots__ = ("_head", "_node", "_seq", "_tick")

    def __init__(self, node_id: int) -> None:
        self._node = node_id << _NODE_ID_SHIFT
        #: The tick of the last id taken, and its 13 hex digits.
        self._tick = 0
        self._head = b""
        #: The next sequence number in that tick (past _SEQUENCE_MASK: the tick is used up).
        self._seq = 0

    def message(self, body: bytes, timestamp: int) -> Message:
        """A new message for ``body`` (one PUB: :meth:`messages` without the lists)."""
        tick = time.time_ns() >> 20
        seq = self._seq
        if tick > self._tick or seq > _SEQUENCE_MASK:
            self._start_tick(max(tick, self._tick + 1))
            seq = 0
        self._seq = seq + 1
        return Message(self._head + _HEX_SEQUENCES[seq] + body, timestamp)

    def messages(self, bodies: list[bytes], timestamp: int) -> list[Message]:
        """A new message for each body (its id, then the body), all with ``timestamp``."""
        tick = time.time_ns() >> 20
        if tick > self._tick:
            self._start_tick(tick)
        seq = self._seq
        stop = seq + len(bodies)
        if stop <= _SEQUENCE_MASK + 1:  # within one tick: ids and messages in one pass
            self._seq = stop
            head = self._head
            return [
                Message(head + hex_seq + body, timestamp)
                for hex_seq, body in zip(_HEX_SEQUENCES[seq:stop], bodies, strict=True)
            ]
        ids: list[bytes] = []
        while len(ids) < len(bodies):
            if self._seq > _SEQUENCE_MASK:  # tick used up: borrow the next one
                self._start_tick(self._tick + 1)
            seq = self._seq
            stop = min(_SEQUENCE_MASK + 1, seq + len(bodies) - len(ids))
            head = self._head
            ids += [head + hex_seq for hex_seq in _HEX_SEQUENCES[seq:stop]]
            self._seq = stop
        return [Message(i + body, timestamp) for i, body in zip(ids, bodies, strict=True)]

    def _start_tick(self, tick: int) -> None:
        self._tick = tick
        self._seq = 0
        base = (tick - _TWEPOCH) << _TIMESTAMP_SHIFT | self._node
        self._head = b"%013x" % (base >> _NODE_ID_SHIFT)  # the id without its sequence


def encode_messages(msgs: list[Message]) -> list[bytes]:
    """Each message's encoding, as on disk and in delivery frames: timestamp, attempts, id, body."""
    pack = MESSAGE_HEADER.pack
    return [pack(m.timestamp, m.attempts) + m.data for m in msgs]


def encode_each(msgs: list[Message]) -> tuple[list[bytes], list[Message]]:
    """:func:`encode_messages`, less what cannot be encoded: ``(records, refused)``.

    A timestamp outside int64 or attempts outside uint16 (a field set by hand: every public
    path keeps both in range) costs only that message, never the batch it came in.
    """
    try:
        return encode_messages(msgs), []
    except struct.error:
        pass
    pack = MESSAGE_HEADER.pack
    records: list[bytes] = []
    refused: list[Message] = []
    for m in msgs:
        try:
            records.append(pack(m.timestamp, m.attempts) + m.data)
        except struct.error:
            refused.append(m)
    return records, refused
