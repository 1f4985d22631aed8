"""One nsqd's state as snapshot records, and snapshot records applied to an nsqd (issue #34).

:func:`save_node` writes, in one synchronous pass (nothing else runs on the loop meanwhile,
so it is one consistent cut of the node), every topic and channel but the ephemeral ones
(nsqd leaves those out of ``nsqd.dat`` too) and every message they hold:

- a topic's own messages (held before its first channel, or while it is paused): memory
  (a DPUB's delay as ``delay_ms``), then its disk queue;
- a channel's: memory, then its disk queue (``disk``), then in-flight messages as queued,
  with the attempts they have, then deferred ones with the delay left in broker time.

Disk records are read from the read position on with a file descriptor of their own
(:func:`~nsqbox.nsqd.diskqueue.walk.unread_records`): the queues are left as they were.

:class:`NodeLoader` applies records to an nsqd: topics and channels are created (and paused)
as nsqd's HTTP API would, queued messages go where they were (memory while it has room, the
disk queue for ``disk`` ones and the overflow), deferred ones wait out their delay from the
node's broker time now. It merges: what the node holds stays. Nobody is delivered to while
it runs (it is synchronous); the caller pumps afterwards (:meth:`NodeLoader.finish`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...snapshot.format import ChannelLine, MessageLine, Record, TopicLine, message_body
from ...wire.message import MESSAGE_HEADER, MIN_VALID_MSG_LENGTH, MSG_ID_LENGTH
from ..diskqueue.reader import DiskQueueReader
from ..diskqueue.walk import unread_records
from .message import Message

if TYPE_CHECKING:
    from ...snapshot.files import SnapshotWriter
    from .backend import BackendQueue
    from .channel import Channel
    from .nsqd import NSQD
    from .topic import Topic

__all__ = ["NodeLoader", "SnapshotDiskError", "save_node"]

#: Queued messages gathered before each write to a queue.
_BATCH = 1024


class SnapshotDiskError(OSError):
    """A disk queue could not be read whole: the snapshot would miss messages."""


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def save_node(nsqd: NSQD, node: int, writer: SnapshotWriter) -> None:
    """Write node ``node``'s topics, channels and messages (see the module doc)."""
    now = nsqd.now()
    wall_ns = nsqd.wall_ns()
    for topic in list(nsqd.topics.values()):
        if topic.ephemeral or topic.exiting:
            continue
        name = topic.name
        writer.topic(node, name, topic.paused)
        channels = [c for c in topic.channels.values() if not c.ephemeral and not c.exiting]
        for channel in channels:
            writer.channel(node, name, channel.name, channel.paused)
        for msg in topic.memory:  # a DPUB held at the topic carries its delay in its lease
            writer.message(
                node, name, None, msg.id, msg.timestamp, msg.attempts, msg.body, _ms(msg.deadline)
            )
        _save_disk(writer, node, name, None, topic.backend, {}, wall_ns)
        for channel in channels:
            _save_channel(writer, node, channel, now, wall_ns)


def _save_channel(
    writer: SnapshotWriter, node: int, channel: Channel, now: float, wall_ns: int
) -> None:
    topic, name = channel.topic_name, channel.name
    for msg in channel.memory:
        writer.message(node, topic, name, msg.id, msg.timestamp, msg.attempts, msg.body)
    _save_disk(writer, node, topic, name, channel.backend, channel.restored_deadlines, wall_ns)
    for msg in channel.in_flight.page(0, len(channel.in_flight)):
        writer.message(node, topic, name, msg.id, msg.timestamp, msg.attempts, msg.body)
    for msg in channel.deferred.page(0, len(channel.deferred)):
        delay = _ms(msg.deadline - now) or 1  # due but not yet queued: due at once on load
        writer.message(node, topic, name, msg.id, msg.timestamp, msg.attempts, msg.body, delay)


def _save_disk(
    writer: SnapshotWriter,
    node: int,
    topic: str,
    channel: str | None,
    backend: BackendQueue,
    restored: dict[bytes, int],
    wall_ns: int,
) -> None:
    """Every unread record of a disk queue; a deferred one restored at start keeps its delay."""
    if not backend.depth:
        return
    if not isinstance(backend, DiskQueueReader):
        raise SnapshotDiskError(f"the disk queue of {topic}:{channel} cannot be read")
    message = writer.message
    for batch in unread_records(backend):
        for data in batch:
            if len(data) < MIN_VALID_MSG_LENGTH:
                continue  # nsqd skips an undecodable record too
            timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
            msg_id = data[10 : 10 + MSG_ID_LENGTH]
            deadline = restored.get(msg_id) if restored else None
            delay = 0 if deadline is None else max(0, (deadline - wall_ns) // 1_000_000)
            body = data[10 + MSG_ID_LENGTH :]
            message(node, topic, channel, msg_id, timestamp, attempts, body, delay, not delay)


class NodeLoader:
    """Applies the records of one node (``node``) to ``nsqd`` (see the module doc)."""

    def __init__(self, nsqd: NSQD, node: int) -> None:
        self.nsqd = nsqd
        self.node = node
        self.now = nsqd.now()
        self._owner: Topic | Channel | None = None
        self._memory: list[Message] = []
        self._disk: list[Message] = []
        self._touched: list[Topic] = []
        #: Deferred messages not loaded because the channel already defers that id.
        self.skipped = 0
        self.messages = 0

    def apply(self, record: Record) -> None:
        """Apply one record (records of other nodes are ignored)."""
        if isinstance(record, MessageLine):
            if record.node == self.node:
                self._message(record)
            return
        if not isinstance(record, TopicLine | ChannelLine) or record.node != self.node:
            return
        self._flush()
        topic = self.nsqd.get_topic(record.topic)
        if isinstance(record, TopicLine):
            self._touched.append(topic)
            if record.paused and not topic.paused:
                topic.pause()
            return
        channel = topic.get_channel(record.channel)
        if record.paused and not channel.paused:
            channel.pause()

    def _message(self, record: MessageLine) -> None:
        topic = self.nsqd.topics[record.topic]  # created by its topic line, checked before
        owner: Topic | Channel = topic
        if record.channel is not None:
            owner = topic.channels[record.channel]
        if owner is not self._owner:
            self._flush()
            self._owner = owner
        self.messages += 1
        data = record.id.encode("ascii") + message_body(record)
        msg = Message(data, record.timestamp, record.attempts)
        delay = record.delay_ms / 1000
        if delay and record.channel is not None:
            channel = topic.channels[record.channel]
            if msg.id in channel.deferred:
                self.skipped += 1
            else:
                channel.deferred.add(msg.id, msg, self.now + delay)
            return
        if delay:  # a DPUB held at the topic: the delay rides in the lease until fan-out
            msg.lease = (0, 0.0, delay)
        (self._disk if record.disk else self._memory).append(msg)
        if len(self._memory) + len(self._disk) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        owner = self._owner
        if owner is None or not (self._memory or self._disk):
            return
        memory, disk = self._memory, self._disk
        self._memory, self._disk = [], []
        room = max(0, owner.mem_limit - len(owner.memory))
        owner.memory.extend(memory[:room])
        spill = memory[room:] + disk
        if spill and not self.nsqd.write_to_backend(owner.backend, spill):
            raise SnapshotDiskError(self.nsqd.health_error or "failed to write to the disk queue")

    def finish(self) -> None:
        """Write what is gathered, then let the topics and channels deliver."""
        self._flush()
        self._owner = None
        now = self.nsqd.now()
        for topic in self._touched:
            topic.pump()
            for channel in topic.channels.values():
                channel.pump(now)
