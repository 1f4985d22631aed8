"""One nsqd's state cut into a spool of snapshot sections (issue #34).

:func:`cut_node` writes, in one synchronous pass (nothing else runs on the loop meanwhile,
so it is one consistent cut of the node), every topic and channel but the ephemeral ones
(nsqd leaves those out of ``nsqd.dat`` too) and every message they hold, as the sections of
:mod:`nsqbox.snapshot.spool` (the saver turns them into snapshot lines; nothing here builds a
line per message):

- a topic's own messages (held before its first channel, or while it is paused): memory
  (a DPUB's delay as the delay left), then its disk queue;
- a channel's: memory, then its disk queue (``disk``), then in-flight messages as queued,
  with the attempts they have, then deferred ones with the delay left in broker time.

A disk queue's unread records are copied as they are in its files, from the read position to
the write position, by the kernel (``copy_file_range``: a million messages of 100 bytes in
about 0.1 s), with file descriptors of their own: the queues are left as they were. A channel
restored at start with deadlines from ``nsqd.dat`` is read a record at a time instead
(:func:`~nsqbox.nsqd.diskqueue.walk.unread_records`), its deferred ones keeping their delay.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO, Final, Literal

from ...snapshot.format import ChannelLine, TopicLine, encode
from ...snapshot.spool import Section, section_line
from ...wire.message import MIN_VALID_MSG_LENGTH, MSG_ID_LENGTH
from ..diskqueue.reader import DiskQueueReader
from ..diskqueue.walk import unread_records
from .snapshot import SnapshotDiskError

if TYPE_CHECKING:
    from .backend import BackendQueue
    from .message import Message
    from .nsqd import NSQD

__all__ = ["cut_node"]

#: A queued record in a spool: length, then the message header (the disk queue's framing).
_FRAME: Final = struct.Struct(">iqH")
#: A deferred record in a spool: length, delay left (ms), then the message header.
_DEFERRED_FRAME: Final = struct.Struct(">iqqH")
_LENGTH: Final = struct.Struct(">i")
_DELAY: Final = struct.Struct(">q")


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def cut_node(nsqd: NSQD, node: int, stream: BinaryIO) -> tuple[int, int, int]:
    """Write node ``node``'s topics, channels and messages (see the module doc) to ``stream``
    (a file) as spool sections (:mod:`nsqbox.snapshot.spool`); how many topics, channels and
    messages (disk queues counted by their depth) it holds."""
    spool = _Spool(stream, node)
    now = nsqd.now()
    wall_ns = nsqd.wall_ns()
    for topic in list(nsqd.topics.values()):
        if topic.ephemeral or topic.exiting:
            continue
        name = topic.name
        channels = [c for c in topic.channels.values() if not c.ephemeral and not c.exiting]
        lines = [encode(TopicLine(node, name, topic.paused))]
        lines += [encode(ChannelLine(node, name, c.name, c.paused)) for c in channels]
        spool.lines(b"".join(lines), len(channels))
        # a DPUB held at the topic carries its delay in its lease
        spool.deferred(name, None, [(msg, _ms(msg.deadline)) for msg in topic.memory])
        _cut_disk(spool, name, None, topic.backend, {}, wall_ns)
        for channel in channels:
            cname = channel.name
            spool.queued(name, cname, channel.memory)
            _cut_disk(spool, name, cname, channel.backend, channel.restored_deadlines, wall_ns)
            spool.queued(name, cname, channel.in_flight.page(0, len(channel.in_flight)))
            deferred = channel.deferred.page(0, len(channel.deferred))
            # due but not yet queued: due at once on load
            spool.deferred(name, cname, [(m, _ms(m.deadline - now) or 1) for m in deferred])
    return spool.topics, spool.channels, spool.messages


class _Spool:
    """Spool sections written to a file (:mod:`nsqbox.snapshot.spool`), with their counts."""

    def __init__(self, stream: BinaryIO, node: int) -> None:
        self.stream = stream
        self.node = node
        self.topics = 0
        self.channels = 0
        self.messages = 0

    def lines(self, data: bytes, channels: int) -> None:
        """A topic's line and its channels' (``channels`` of them)."""
        self.topics += 1
        self.channels += channels
        head = Section("lines", len(data), topics=1, channels=channels)
        self.stream.write(section_line(head) + data)

    def queued(self, topic: str, channel: str, msgs: Sequence[Message]) -> None:
        """Messages queued in memory (or in flight: saved as queued)."""
        if msgs:
            pack = _FRAME.pack
            data = b"".join(
                [pack(len(m.data) + 10, m.timestamp, m.attempts) + m.data for m in msgs]
            )
            self.records("queued", topic, channel, data, len(msgs))

    def deferred(self, topic: str, channel: str | None, msgs: list[tuple[Message, int]]) -> None:
        """Messages with the delay they have left (ms)."""
        if msgs:
            pack = _DEFERRED_FRAME.pack
            data = b"".join(
                [
                    pack(len(m.data) + 18, delay, m.timestamp, m.attempts) + m.data
                    for m, delay in msgs
                ]
            )
            self.records("deferred", topic, channel, data, len(msgs))

    def records(
        self,
        kind: Literal["queued", "deferred"],
        topic: str,
        channel: str | None,
        data: bytes,
        count: int,
        disk: bool = False,
    ) -> None:
        head = Section(kind, len(data), self.node, topic, channel, disk)
        self.stream.write(section_line(head))
        self.stream.write(data)
        self.messages += count

    def copy(self, topic: str, channel: str | None, ranges: list[tuple[int, int, int]]) -> None:
        """A disk queue's unread records as they are in its files: ``(fd, start, end)``
        ranges, copied by the kernel (no message is read here)."""
        size = sum(end - start for _, start, end in ranges)
        head = Section("queued", size, self.node, topic, channel, True)
        self.stream.write(section_line(head))
        self.stream.flush()
        out = self.stream.fileno()
        for fd, start, end in ranges:
            while start < end:
                copied = _copy(fd, out, end - start, start)
                if not copied:
                    raise SnapshotDiskError(f"a disk queue file of {topic}:{channel} ends early")
                start += copied
        self.stream.seek(0, os.SEEK_END)


def _copy(source: int, out: int, count: int, offset: int) -> int:
    """Copy up to ``count`` bytes of ``source`` from ``offset`` to ``out`` at its position:
    in the kernel when it can (``copy_file_range``), else through a MiB buffer."""
    try:
        return os.copy_file_range(source, out, count, offset)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    data = os.pread(source, min(count, 1024 * 1024), offset)
    written = 0
    while written < len(data):
        written += os.write(out, memoryview(data)[written:])
    return len(data)


def _cut_disk(
    spool: _Spool,
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
    if restored:  # rare (deadlines nsqd.dat kept): a record at a time
        _cut_restored(spool, topic, channel, backend, restored, wall_ns)
        return
    read_file, read_pos, write_file, write_pos = backend.positions
    fds: list[int] = []
    try:
        ranges = []
        for number in range(read_file, write_file + 1):
            try:
                fd = os.open(backend.file_name(number), os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise SnapshotDiskError(f"{exc.strerror}: file {number}") from None
            fds.append(fd)
            end = write_pos if number == write_file else os.fstat(fd).st_size
            ranges.append((fd, read_pos if number == read_file else 0, end))
        spool.copy(topic, channel, ranges)
        spool.messages += backend.depth
    finally:
        for fd in fds:
            os.close(fd)


def _cut_restored(
    spool: _Spool,
    topic: str,
    channel: str | None,
    backend: DiskQueueReader,
    restored: dict[bytes, int],
    wall_ns: int,
) -> None:
    queued: list[bytes] = []
    deferred: list[bytes] = []
    pack, pack_deferred = _LENGTH.pack, _DELAY.pack
    for batch in unread_records(backend):
        for data in batch:
            if len(data) < MIN_VALID_MSG_LENGTH:
                continue  # nsqd skips an undecodable record too
            deadline = restored.get(data[10 : 10 + MSG_ID_LENGTH])
            if deadline is None:
                queued.append(pack(len(data)) + data)
            else:
                delay = max(0, (deadline - wall_ns) // 1_000_000)
                deferred.append(pack(len(data) + 8) + pack_deferred(delay) + data)
    if queued:
        spool.records("queued", topic, channel, b"".join(queued), len(queued), True)
    if deferred:
        spool.records("deferred", topic, channel, b"".join(deferred), len(deferred))
