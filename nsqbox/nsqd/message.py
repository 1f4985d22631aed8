"""The in-memory message and the snowflake ID factory."""

from __future__ import annotations

import time
from typing import Final

import msgspec

from ..wire.message import MESSAGE_HEADER, MIN_VALID_MSG_LENGTH, MSG_ID_LENGTH

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
    """

    __slots__ = ("_last_ts", "_node", "_seq")

    def __init__(self, node_id: int) -> None:
        self._node = node_id << _NODE_ID_SHIFT
        self._last_ts = 0
        self._seq = 0

    def messages(self, bodies: list[bytes], timestamp: int) -> list[Message]:
        """A new message for each body (its id, then the body), all with ``timestamp``."""
        ranges = self._take(len(bodies))
        if len(ranges) == 1:  # within one tick: ids and messages in one pass
            base, start, stop = ranges[0]
            head = b"%013x" % (base >> _NODE_ID_SHIFT)
            return [
                Message(head + seq + body, timestamp)
                for seq, body in zip(_HEX_SEQUENCES[start:stop], bodies, strict=True)
            ]
        ids = _hex_ids(ranges)
        return [Message(i + body, timestamp) for i, body in zip(ids, bodies, strict=True)]

    def _take(self, count: int) -> list[tuple[int, int, int]]:
        """Reserve ``count`` IDs: ``(base, start, stop)`` per tick, each ID ``base | seq``."""
        ts = time.time_ns() >> 20
        if ts > self._last_ts:
            self._last_ts = ts
            self._seq = 0
        else:
            ts = self._last_ts
        out = []
        seq = self._seq
        node = self._node
        while count:
            room = min(count, _SEQUENCE_MASK + 1 - seq)
            out.append((((ts - _TWEPOCH) << _TIMESTAMP_SHIFT) | node, seq, seq + room))
            count -= room
            seq += room
            if seq > _SEQUENCE_MASK:  # tick exhausted: borrow the next one
                ts += 1
                seq = 0
        self._last_ts = ts
        self._seq = seq
        return out


def encode_messages(msgs: list[Message]) -> list[bytes]:
    """Each message's encoding, as on disk and in delivery frames: timestamp, attempts, id, body."""
    pack = MESSAGE_HEADER.pack
    return [pack(m.timestamp, m.attempts) + m.data for m in msgs]


def _hex_ids(ranges: list[tuple[int, int, int]]) -> list[bytes]:
    out: list[bytes] = []
    for base, start, stop in ranges:
        head = b"%013x" % (base >> _NODE_ID_SHIFT)
        out += [head + seq for seq in _HEX_SEQUENCES[start:stop]]
    return out
