"""In-flight and deferred messages: keyed by id, expiring at a deadline.

nsqd keeps a binary heap with per-item indexes. Here every operation a message
takes on the hot path (add, FIN, REQ, TOUCH) is O(1): messages sit in coarse
time buckets (dicts), and only bucket keys go into a heap, so the heap grows by
one entry per bucket (at most 100 per second), not per message.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

from .message import Lease, Message

#: Bucket width in seconds. Expiry may run up to this late, well inside the
#: 100 ms queue-scan interval.
RESOLUTION = 0.01


def _bucket(deadline: float) -> int:
    return int(deadline / RESOLUTION) + 1


class TimeoutQueue:
    """A set of messages by id, each with a deadline (server clock seconds)."""

    __slots__ = ("_buckets", "_heap", "_items")

    def __init__(self) -> None:
        self._items: dict[bytes, Message] = {}
        self._buckets: dict[int, dict[bytes, Message]] = {}
        self._heap: list[int] = []

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, msg_id: object) -> bool:
        return msg_id in self._items

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._items.values()))

    def get(self, msg_id: bytes) -> Message | None:
        """The message with this id, if held."""
        return self._items.get(msg_id)

    def page(self, start: int, count: int) -> list[Message]:
        """Up to ``count`` held messages from the ``start``-th on, oldest added first.

        Changes nothing (nsqbox's peek route); costs O(start + count).
        """
        return list(itertools.islice(self._items.values(), start, start + count))

    def add(self, msg_id: bytes, msg: Message, deadline: float) -> None:
        """Hold ``msg`` (whose id is ``msg_id``) until ``deadline``; the id must be new here.

        The message's lease gets the deadline; its client and delivery time stay.
        """
        lease = msg.lease
        if lease[2] != deadline:
            msg.lease = (lease[0], lease[1], deadline)
        key = _bucket(deadline)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = {}
            heapq.heappush(self._heap, key)
        bucket[msg_id] = msg
        self._items[msg_id] = msg

    def add_batch(self, msgs: list[Message], lease: Lease) -> None:
        """Hold every message of ``msgs`` until the same deadline: they share ``lease``."""
        key = _bucket(lease[2])
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = {}
            heapq.heappush(self._heap, key)
        items = self._items
        for msg in msgs:
            msg.lease = lease
            msg_id = msg.data[:16]
            bucket[msg_id] = msg
            items[msg_id] = msg

    def remove(self, msg_id: bytes, msg: Message) -> None:
        """Stop holding ``msg`` (which must be held)."""
        del self._items[msg_id]
        key = int(msg.lease[2] / RESOLUTION) + 1  # _bucket(), inlined: once per FIN
        bucket = self._buckets[key]
        del bucket[msg_id]
        if not bucket:
            del self._buckets[key]  # its heap key is skipped when it surfaces

    def take(
        self, msg_ids: list[bytes], client_id: int
    ) -> tuple[list[Message], list[tuple[bytes, Message | None]]]:
        """Stop holding each message of ``msg_ids`` delivered to ``client_id``, in one pass.

        Returns those messages, and the ids refused, each with the message held under it
        (delivered to another client) or None (not held).
        """
        items = self._items
        buckets = self._buckets
        taken: list[Message] = []
        refused: list[tuple[bytes, Message | None]] = []
        key = -1
        bucket: dict[bytes, Message] = {}
        last: Lease | None = None  # a run of FINs mostly finds one delivery's lease
        for msg_id in msg_ids:
            msg = items.get(msg_id)
            if msg is None:
                refused.append((msg_id, msg))
                continue
            lease = msg.lease
            if lease is not last:
                if lease[0] != client_id:
                    refused.append((msg_id, msg))
                    continue
                last = lease
                msg_key = int(lease[2] / RESOLUTION) + 1  # _bucket(), inlined
                if msg_key != key:
                    if not bucket and key in buckets:
                        del buckets[key]  # emptied: its heap key is skipped when it surfaces
                    key = msg_key
                    bucket = buckets[key]
            del items[msg_id]
            del bucket[msg_id]
            taken.append(msg)
        if not bucket and key in buckets:
            del buckets[key]
        return taken, refused

    def pop_expired(self, now: float) -> list[Message]:
        """Remove and return every message whose bucket ended at or before ``now``."""
        heap = self._heap
        limit = int(now / RESOLUTION)
        out: list[Message] = []
        items = self._items
        while heap and heap[0] <= limit:
            key = heapq.heappop(heap)
            bucket = self._buckets.pop(key, None)
            if bucket is None:
                continue
            for msg_id, msg in bucket.items():
                del items[msg_id]
                out.append(msg)
        if out:
            out.sort(key=_deadline)
        return out

    def clear(self) -> list[Message]:
        """Drop everything; return what was held."""
        held = list(self._items.values())
        self._items.clear()
        self._buckets.clear()
        self._heap.clear()
        return held

    def earliest(self) -> float | None:
        """The earliest deadline held, None when empty (a manual clock's next step)."""
        heap, buckets = self._heap, self._buckets
        while heap:
            bucket = buckets.get(heap[0])
            if bucket:
                return min(msg.deadline for msg in bucket.values())
            heapq.heappop(heap)  # a bucket emptied by remove(): its key is stale
        return None


def _deadline(msg: Message) -> float:
    return msg.lease[2]
