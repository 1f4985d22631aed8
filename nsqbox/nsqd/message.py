"""The in-memory message and the snowflake ID factory."""

from __future__ import annotations

import time

from ..wire.message import MESSAGE_HEADER, decode_message

# Snowflake layout (nsqd/guid.go): 41 bits of ~ms time, 10 bits node, 12 bits sequence.
_NODE_ID_SHIFT = 12
_TIMESTAMP_SHIFT = 22
_SEQUENCE_MASK = (1 << 12) - 1
_TWEPOCH = 1288834974288


class Message:
    """One message as held by a topic or a channel.

    Each channel holds its own copy (same id, body and timestamp) because
    attempts, owner and deadlines are per channel.
    """

    __slots__ = ("attempts", "body", "client_id", "deadline", "deferred", "delivery_ts", "id",
                 "timestamp", "tq_key")

    def __init__(self, msg_id: bytes, body: bytes, timestamp: int, attempts: int = 0) -> None:
        self.id = msg_id
        self.body = body
        self.timestamp = timestamp  # wall clock, ns (what clients see)
        self.attempts = attempts
        self.client_id = 0
        self.delivery_ts = 0.0  # server clock, seconds
        self.deadline = 0.0  # server clock, seconds (in-flight or deferred expiry)
        self.deferred = 0.0  # seconds to defer when the topic hands it to channels
        self.tq_key = 0  # bucket of the TimeoutQueue holding it

    def copy(self) -> Message:
        """A fresh copy for another channel (same id, body, timestamp; nsqd does the same)."""
        m = Message(self.id, self.body, self.timestamp, self.attempts)
        m.deferred = self.deferred
        return m

    def encode(self) -> bytes:
        """The message encoding (as on disk and in delivery frames)."""
        return MESSAGE_HEADER.pack(self.timestamp, self.attempts) + self.id + self.body

    @classmethod
    def decode(cls, data: bytes) -> Message:
        """Inverse of :meth:`encode`."""
        d = decode_message(data)
        return cls(d.id, d.body, d.timestamp, d.attempts)

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

    def new_ids(self, count: int) -> list[bytes]:
        """``count`` consecutive unique IDs."""
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
            base = ((ts - _TWEPOCH) << _TIMESTAMP_SHIFT) | node
            out.extend([b"%016x" % (base | s) for s in range(seq, seq + room)])
            count -= room
            seq += room
            if seq > _SEQUENCE_MASK:  # tick exhausted: borrow the next one
                ts += 1
                seq = 0
        self._last_ts = ts
        self._seq = seq
        return out
