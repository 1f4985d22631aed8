"""A fake node, backend and consumer, to drive Topic and Channel without sockets or disk.

They implement :class:`nsqbox.nsqd.domain.node.Node`,
:class:`nsqbox.nsqd.domain.backend.BackendQueue`
and :class:`nsqbox.nsqd.domain.channel.Consumer` the way NSQD, DiskQueue and ClientState do, minus
the I/O, and record what the domain asked of them.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence

from nsqbox.nsqd.domain.backend import BackendQueue
from nsqbox.nsqd.domain.channel import Channel
from nsqbox.nsqd.domain.journal import Journal
from nsqbox.nsqd.domain.message import Message, encode_messages
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.domain.quantile import Quantile
from nsqbox.nsqd.domain.topic import Topic


class MemoryBackend:
    """A BackendQueue in a deque; ``failing`` makes every put raise OSError."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.records: deque[bytes] = deque()
        self.failing = False
        self.closed = False
        self.deleted = False
        self.syncs = 0

    @property
    def depth(self) -> int:
        """Records held."""
        return len(self.records)

    def put(self, data: bytes) -> None:
        """Append, or fail like a full disk."""
        if self.failing:
            raise OSError(28, "No space left on device")
        self.records.append(data)

    def put_many(self, items: Sequence[bytes]) -> None:
        """Append them all, or fail like a full disk (nothing is kept)."""
        if self.failing:
            raise OSError(28, "No space left on device")
        self.records.extend(items)

    def pop(self) -> bytes | None:
        """The oldest record, or None."""
        return self.records.popleft() if self.records else None

    def maybe_sync(self) -> bool:
        """Count the call (nothing to sync)."""
        self.syncs += 1
        return False

    def empty(self) -> None:
        """Drop every record."""
        self.records.clear()

    def delete(self) -> None:
        """Drop every record, as deleting the files does."""
        self.records.clear()
        self.deleted = True

    def close(self) -> None:
        """Remember that it was closed (records stay, as on disk)."""
        self.closed = True

    def release(self) -> None:
        """Remember that it was closed."""
        self.closed = True


class FakeNode:
    """A Node with a hand-moved clock, in-memory backends and a log of calls."""

    def __init__(self, *, mem_queue_size: int = 10, e2e: bool = False, **options: object) -> None:
        self.options = NSQDOptions(node_id=1, mem_queue_size=mem_queue_size)
        for key, value in options.items():
            setattr(self.options, key, value)
        self.clock = 1000.0
        self.random = random.Random(7)
        self.logger = logging.getLogger("tests.nsqd.fake_node")
        self.health_error: str | None = None
        self.publish_fault: Callable[[str], str | None] | None = None
        self.journal: Journal | None = None
        self.e2e = e2e
        self.backends: dict[str, MemoryBackend] = {}
        self.persisted = 0
        self.flushed: dict[str, list[bytes]] = {}
        self.saved_deferred: list[tuple[str, str, list[bytes], dict[bytes, int]]] = []
        self.restored: dict[tuple[str, str], dict[bytes, int]] = {}
        self.notified: list[tuple[str, bool]] = []  # (repr, exiting)
        self.deleted_topics: list[str] = []

    def now(self) -> float:
        """The hand-moved clock."""
        return self.clock

    def wall_ns(self) -> int:
        """Wall time, ns (message timestamps)."""
        return time.time_ns()

    def new_backend(self, name: str, ephemeral: bool) -> MemoryBackend:
        """A fresh in-memory backend, remembered by name."""
        backend = MemoryBackend(name)
        self.backends[name] = backend
        return backend

    def write_to_backend(self, backend: BackendQueue, msgs: list[Message]) -> bool:
        """As NSQD: a failure marks the node unhealthy, a success heals it."""
        try:
            backend.put_many(encode_messages(msgs))
        except OSError as exc:
            self.health_error = str(exc)
            return False
        self.health_error = None
        return True

    def flush_backend(self, name: str, backend: BackendQueue, msgs: list[Message]) -> None:
        """Write ``msgs`` and close; remember the bodies flushed."""
        backend.put_many(encode_messages(msgs))
        backend.close()
        self.flushed[name] = [m.body for m in msgs]

    def new_e2e_latency(self) -> Quantile | None:
        """A tracker when made with ``e2e=True``."""
        return Quantile(600.0, [0.5]) if self.e2e else None

    def persist_metadata(self) -> None:
        """Count the calls."""
        self.persisted += 1

    def restored_deadlines(self, topic: str, channel: str) -> dict[bytes, int]:
        """What the test put in ``restored`` for this channel."""
        return self.restored.pop((topic, channel), {})

    def save_deferred(
        self, topic: str, channel: str, msgs: list[Message], restored: dict[bytes, int]
    ) -> None:
        """Remember what a closing channel handed over."""
        self.saved_deferred.append((topic, channel, [m.body for m in msgs], dict(restored)))

    # -- as NSQD wires its topics ----------------------------------------------------------
    def notify(self, obj: Topic | Channel) -> None:
        """Record a creation or deletion."""
        self.notified.append((repr(obj), obj.exiting))

    def topic(self, name: str = "t") -> Topic:
        """A started topic wired to this node, as NSQD.get_topic makes one."""
        topic = Topic(name, self, notify=self.notify, on_delete=self._topic_deleted)
        topic.start()
        return topic

    def _topic_deleted(self, topic: Topic) -> None:
        self.deleted_topics.append(topic.name)
        topic.delete()


class FakeConsumer:
    """A Consumer whose output buffer is a list of messages (``out_limit`` bytes)."""

    def __init__(
        self,
        client_id: int,
        *,
        rdy: int = 0,
        msg_timeout: float = 60.0,
        sample_rate: int = 0,
        out_limit: int = 1 << 20,
    ) -> None:
        self.id = client_id
        self.ready_count = rdy
        self.in_flight_count = 0
        self.sample_rate = sample_rate
        self.msg_timeout = msg_timeout
        self.in_ring = False
        self.out_limit = out_limit
        self.out_bytes = 0
        self.received: list[Message] = []
        self.closed = False

    def can_take(self) -> bool:
        """In flight below RDY and room in the output buffer."""
        return self.in_flight_count < self.ready_count and self.out_bytes < self.out_limit

    def out_room(self) -> int:
        """Bytes the buffer may still take."""
        return self.out_limit - self.out_bytes

    def send_message(self, msg: Message) -> None:
        """Buffer one message (the channel counts it in flight: ``in_flight_count`` is its)."""
        self.received.append(msg)
        self.out_bytes += len(msg.data) + 30

    def send_messages(self, msgs: list[Message]) -> None:
        """Buffer several."""
        for msg in msgs:
            self.send_message(msg)

    def close(self) -> None:
        """Disconnected by the channel."""
        self.ready_count = 0
        self.closed = True

    def written(self) -> None:
        """The writer sent the buffer: room again."""
        self.out_bytes = 0

    def bodies(self) -> list[bytes]:
        """Bodies received, in order."""
        return [m.body for m in self.received]

    # -- what ProtocolV2's handlers do around the channel calls ------------------------------
    def rdy(self, channel: Channel, count: int, now: float) -> None:
        """RDY ``count``."""
        self.ready_count = count
        channel.client_ready(self, now)

    def fin(self, channel: Channel, msg: Message, now: float) -> None:
        """FIN ``msg``."""
        assert channel.finish_messages(self, [msg.id]) == []
        channel.client_ready(self, now)

    def req(self, channel: Channel, msg: Message, delay: float, now: float) -> None:
        """REQ ``msg`` after ``delay`` seconds."""
        channel.requeue_message(self, msg.id, delay, now)
        channel.client_ready(self, now)
