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

With ``replace`` it replaces instead: every topic and channel the node holds is emptied first
(as ``/topic/empty`` and ``/channel/empty``: queued, in-flight and deferred messages), the
records are applied with their paused flags as they are in the file (unpausing too), and
:meth:`NodeLoader.finish` deletes every topic and channel the file does not list for this node
(as ``/topic/delete`` and ``/channel/delete``: their consumers are disconnected; ephemeral
ones too, which a snapshot never holds). All of it in the same synchronous pass as the load,
so nothing happens on the node between the old state and the new one: the node ends as a
fresh one loaded from the file would, its counters (``message_count``...) aside, which
emptying leaves as nsqd's ``/channel/empty`` does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...snapshot.format import ChannelLine, MessageLine, Record, TopicLine, message_body
from ...snapshot.loaded import LoadedSnapshot, load_name
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
    """Applies the records of one node (``node``) to ``nsqd``; with ``replace``, what the
    node holds goes first (see the module doc)."""

    def __init__(self, nsqd: NSQD, node: int, *, replace: bool = False) -> None:
        self.nsqd = nsqd
        self.node = node
        self.replace = replace
        self.now = nsqd.now()
        self._owner: Topic | Channel | None = None
        self._memory: list[Message] = []
        self._disk: list[Message] = []
        self._touched: list[Topic] = []
        #: The file's topics of this node, with their channels (what ``replace`` keeps).
        self._listed: dict[str, set[str]] = {}
        #: Deferred messages not loaded because the channel already defers that id.
        self.skipped = 0
        self.messages = 0
        #: What ``replace`` removed: messages emptied, topics and channels deleted.
        self.removed_messages = 0
        self.removed_topics = 0
        self.removed_channels = 0
        if replace:
            self._empty_all()

    def _empty_all(self) -> None:
        """Empty every topic and channel (queued, in flight, deferred), as nsqd's empty."""
        for topic in list(self.nsqd.topics.values()):
            if topic.exiting:
                continue
            self.removed_messages += topic.depth()
            topic.empty()
            for channel in list(topic.channels.values()):
                self.removed_messages += (
                    channel.depth() + channel.in_flight_count() + channel.deferred_count()
                )
                channel.empty()
                channel.restored_deadlines.clear()

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
            self._listed[record.topic] = set()
            _set_paused(topic, record.paused, self.replace)
            return
        self._listed[record.topic].add(record.channel)
        _set_paused(topic.get_channel(record.channel), record.paused, self.replace)

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
        """Write what is gathered (with ``replace``, delete what the file does not list),
        then let the topics and channels deliver."""
        self._flush()
        self._owner = None
        if self.replace:
            self._delete_unlisted()
        now = self.nsqd.now()
        for topic in self._touched:
            topic.pump()
            for channel in topic.channels.values():
                channel.pump(now)

    def remember(self, file: str | None, load_id: str = "") -> None:
        """Leave this load on the nsqd (``nsqd.loaded_snapshot``): from ``file`` (its base
        name is kept), now, as part of load ``load_id``."""
        self.nsqd.loaded_snapshot = LoadedSnapshot(
            load_name(file), time.time_ns(), self.replace, self.messages, load_id
        )

    def _delete_unlisted(self) -> None:
        """Delete the topics and channels the file does not list for this node."""
        nsqd = self.nsqd
        for name, topic in list(nsqd.topics.items()):
            listed = self._listed.get(name)
            if listed is None:
                self.removed_topics += 1
                self.removed_channels += len(topic.channels)
                nsqd.delete_existing_topic(name)
                continue
            for channel in [c for c in topic.channels if c not in listed]:
                self.removed_channels += 1
                topic.delete_existing_channel(channel)


def _set_paused(owner: Topic | Channel, paused: bool, exactly: bool) -> None:
    """Pause ``owner`` as the file says; unpause it too when ``exactly`` (a replace)."""
    if paused and not owner.paused:
        owner.pause()
    elif exactly and not paused and owner.paused:
        owner.unpause()
