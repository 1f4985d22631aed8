"""Snapshot records applied to an nsqd (issue #34).

:class:`NodeLoader` loads records into an nsqd (:mod:`.snapshot_cut` cuts one's state), and the
file is read once (:func:`stage_file`): while the reader checks it, :meth:`NodeLoader.apply`
only stages each record, changing nothing on the nsqd (so it may run off the event loop): topic
and channel lines and the messages bound for memory (at most a memory queue's worth per topic
or channel) and deferred ones (nsqd holds those in memory anyway) in memory, every other
message already framed as a disk queue record in a stage file (an unlinked file in the data
path, written a MiB at a time). A damaged or truncated file is refused before anything was
applied (:meth:`NodeLoader.discard`). Only once the whole file passed does
:meth:`NodeLoader.finish` apply it, in one synchronous pass: topics and channels are created
(and paused) as nsqd's HTTP API would, queued messages go where they were (memory while it has
room, the disk queue for ``disk`` ones and the overflow, up to 4 MiB of staged records per
write), deferred ones wait out their delay from the node's broker time then. It merges: what
the node holds stays. Nobody is delivered to while it runs; it pumps at the end. A million
messages never sit in memory: the stage holds what the loaded node will hold in memory, the
rest is on disk.

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

import base64
import os
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, cast

from ...snapshot.format import (
    ChannelLine,
    Header,
    MessageLine,
    Record,
    SnapshotError,
    TopicLine,
)
from ...snapshot.loaded import LoadedSnapshot, load_name
from ...wire.message import MSG_ID_LENGTH
from ..diskqueue.queue import DiskQueue, split_framed
from .message import Message

if TYPE_CHECKING:
    from ...snapshot.files import SnapshotSummary
    from .backend import BackendQueue
    from .channel import Channel
    from .nsqd import NSQD
    from .topic import Topic

__all__ = ["NodeLoader", "SnapshotDiskError", "stage_file"]

#: A staged disk record's length prefix and message header (the disk queue's framing).
_FRAME: Final = struct.Struct(">iqH")
#: Staged disk records gathered before each write to the stage file (and to a disk queue).
_PIECE_BYTES: Final = 1024 * 1024
#: The most staged bytes of one disk queue read back and written to it at once: each write
#: is one of the disk queue's counted syncs (fsync, meta file), so a big load syncs every
#: 4 MiB rather than every MiB (a million messages of 100 bytes, 130 MB staged: 31 syncs, not
#: 124), for 4 MiB more memory while it applies (16 MiB: 50 MB more, and no faster).
_APPLY_BYTES: Final = 4 * 1024 * 1024


class SnapshotDiskError(OSError):
    """A disk queue could not be read whole: the snapshot would miss messages."""


class _Owner:
    """What the file holds for one topic or channel, staged: the messages that go to memory
    (at most its memory queue's size) and the deferred ones (which nsqd holds in memory
    anyway); the rest wait in the stage file (:attr:`NodeLoader._pieces`)."""

    __slots__ = ("deferred", "memory")

    def __init__(self) -> None:
        self.memory: list[Message] = []
        self.deferred: list[tuple[Message, float]] = []


class NodeLoader:
    """Loads the records of one node (``node``) into ``nsqd`` in two steps (module doc):
    :meth:`apply` stages each record as the file is read (off the event loop if the caller
    likes: it changes nothing on the nsqd), :meth:`finish` applies what was staged, in one
    synchronous pass, once the whole file passed; :meth:`discard` drops it instead. With
    ``replace``, what the node holds goes first."""

    def __init__(self, nsqd: NSQD, node: int, *, replace: bool = False) -> None:
        self.nsqd = nsqd
        self.node = node
        self.replace = replace
        options = nsqd.options
        self._mem_limit = options.mem_queue_size
        self._max_body = options.max_msg_size
        #: The file's topic and channel lines of this node, in order.
        self._lines: list[TopicLine | ChannelLine] = []
        self._owners: dict[tuple[str, str | None], _Owner] = {}
        #: The stage file: an unlinked file in the data path, opened on the first record
        #: bound for a disk queue.
        self._stage_fd = -1
        self._stage_size = 0
        #: Staged disk records, a piece at a time: (owner key, offset, bytes, records).
        self._pieces: list[tuple[tuple[str, str | None], int, int, int]] = []
        self._key: tuple[str, str | None] | None = None
        self._owner = _Owner()
        self._framed: list[bytes] = []
        #: How many records ``_framed`` holds (a plain block's are one joined bytes).
        self._framed_count = 0
        self._held = 0
        #: The file's topics of this node, with their channels (what ``replace`` keeps).
        self._listed: dict[str, set[str]] = {}
        #: Deferred messages not loaded because the channel already defers that id.
        self.skipped = 0
        self.messages = 0
        #: What ``replace`` removed: messages emptied, topics and channels deleted.
        self.removed_messages = 0
        self.removed_topics = 0
        self.removed_channels = 0

    def apply(self, record: Record, line: int = 0) -> None:
        """Stage one record, line ``line`` of its file (:meth:`stage`)."""
        self.stage([record], line)

    def stage(self, records: list[Record], first: int, plain: bool = False) -> None:
        """Stage ``records``, the first of them line ``first`` of its file (records of other
        nodes are ignored); ``plain`` when the reader found them plain
        (:class:`~nsqbox.snapshot.files.Batch`): they are then framed for the disk queue in
        one pass when they all go there.

        SnapshotError (with the line) for a message whose body is over the node's
        ``--max-msg-size`` (nsqd refuses such a PUB); OSError when the stage file cannot be
        written. One loop for a whole block of lines: this runs for every message loaded.
        """
        if plain and self._stage_plain(records):
            return
        node, mem_limit, max_body = self.node, self._mem_limit, self._max_body
        message, pack, b64decode = MessageLine, _FRAME.pack, base64.b64decode
        framed = self._framed
        owner = self._owner
        for index, record in enumerate(records):
            if type(record) is not message:
                if isinstance(record, TopicLine | ChannelLine) and record.node == node:
                    self._line(record)
                continue
            if record.node != node:
                continue
            channel = record.channel
            if (record.topic, channel) != self._key:
                self._end_piece()
                framed = self._framed
                self._key = (record.topic, channel)
                owner = self._owner = self._owners.setdefault(self._key, _Owner())
            text = record.body
            body = text.encode() if text is not None else b64decode(record.body_b64 or "")
            if len(body) > max_body:
                raise SnapshotError(
                    first + index,
                    f"a body of {len(body)} bytes is over --max-msg-size ({max_body})",
                )
            self.messages += 1
            data = record.id.encode("ascii") + body
            delay = record.delay_ms
            if delay and channel is not None:
                owner.deferred.append((Message(data, record.timestamp, record.attempts), delay))
            elif not record.disk and len(owner.memory) < mem_limit:
                msg = Message(data, record.timestamp, record.attempts)
                if delay:  # a DPUB held at the topic: the delay rides in the lease until fan-out
                    msg.lease = (0, 0.0, delay / 1000)
                owner.memory.append(msg)
            else:
                size = len(data) + 10
                framed.append(pack(size, record.timestamp, record.attempts) + data)
                self._framed_count += 1
                self._held += size + 4
                if self._held >= _PIECE_BYTES:
                    self._end_piece()
                    framed = self._framed

    def _stage_plain(self, records: list[Record]) -> bool:
        """Stage a plain block whole (:meth:`stage`) when every message in it goes to the
        disk queue (its owner's memory is full, or they were on disk); False when it must
        be staged a record at a time (some go to memory, or a body is over the limit)."""
        messages = cast("list[MessageLine]", records)  # plain: messages with text bodies
        head = messages[0]
        if head.node != self.node:
            return True
        key = (head.topic, head.channel)
        owner = self._owners.get(key)
        if (owner is None or len(owner.memory) < self._mem_limit) and not all(
            r.disk for r in messages
        ):
            return False
        pack = _FRAME.pack
        framed = [
            pack(len(data := (r.id + r.body).encode()) + 10, r.timestamp, r.attempts) + data  # type: ignore[operator]
            for r in messages
        ]
        if max(map(len, framed)) - _FRAME.size - MSG_ID_LENGTH > self._max_body:
            return False  # the record-by-record path names the line
        if key != self._key:
            self._end_piece()
            self._key = key
            self._owner = self._owners.setdefault(key, _Owner())
        data = b"".join(framed)
        self._framed.append(data)
        self._framed_count += len(framed)
        self.messages += len(framed)
        self._held += len(data)
        if self._held >= _PIECE_BYTES:
            self._end_piece()
        return True

    def _line(self, record: TopicLine | ChannelLine) -> None:
        self._lines.append(record)
        if isinstance(record, TopicLine):
            self._listed[record.topic] = set()
        else:
            self._listed[record.topic].add(record.channel)

    def _end_piece(self) -> None:
        """Write the disk records gathered for the current owner to the stage file."""
        if not self._framed:
            return
        assert self._key is not None
        if self._stage_fd < 0:
            fd, path = tempfile.mkstemp(
                prefix="nsqbox.snapshot.", suffix=".stage", dir=self.nsqd.data_path
            )
            os.unlink(path)  # the open descriptor keeps it: nothing is left behind
            self._stage_fd = fd
        data = b"".join(self._framed)
        offset = self._stage_size
        written = os.pwrite(self._stage_fd, data, offset)
        while written < len(data):
            written += os.pwrite(self._stage_fd, memoryview(data)[written:], offset + written)
        last = self._pieces[-1] if self._pieces else None
        if (
            last is not None
            and last[0] == self._key
            and last[1] + last[2] == offset
            and last[2] + len(data) <= _APPLY_BYTES
        ):  # the same queue's next records: one write with the last piece's
            self._pieces[-1] = (last[0], last[1], last[2] + len(data), last[3] + self._framed_count)
        else:
            self._pieces.append((self._key, offset, len(data), self._framed_count))
        self._stage_size += len(data)
        self._framed, self._framed_count, self._held = [], 0, 0

    def discard(self) -> None:
        """Drop what was staged (the file did not pass): the nsqd was never changed."""
        self._owners.clear()
        self._pieces.clear()
        self._framed, self._framed_count, self._held = [], 0, 0
        self._close_stage()

    def _close_stage(self) -> None:
        if self._stage_fd >= 0:
            os.close(self._stage_fd)
            self._stage_fd = -1

    def finish(self) -> None:
        """Apply what was staged, in one synchronous pass: (with ``replace``, empty the node
        first), the topics and channels with their paused flags, the messages, (with
        ``replace``, delete what the file does not list), then let the topics and channels
        deliver. SnapshotDiskError when a disk queue cannot be written."""
        try:
            self._end_piece()
            if self.replace:
                self._empty_all()
            nsqd = self.nsqd
            touched: list[Topic] = []
            for record in self._lines:
                topic = nsqd.get_topic(record.topic)
                if isinstance(record, TopicLine):
                    touched.append(topic)
                    _set_paused(topic, record.paused, self.replace)
                else:
                    _set_paused(topic.get_channel(record.channel), record.paused, self.replace)
            now = nsqd.now()
            for key, staged in self._owners.items():
                self._apply_owner(self._target(key), staged, now)
            self._owners.clear()
            for key, offset, size, count in self._pieces:
                self._put_piece(self._target(key).backend, offset, size, count)
            self._pieces.clear()
        finally:
            self._close_stage()
        if self.replace:
            self._delete_unlisted()
        now = nsqd.now()
        for topic in touched:
            topic.pump()
            for channel in topic.channels.values():
                channel.pump(now)

    def _target(self, key: tuple[str, str | None]) -> Topic | Channel:
        topic = self.nsqd.topics[key[0]]  # created by its topic line, listed before
        return topic if key[1] is None else topic.channels[key[1]]

    def _apply_owner(self, owner: Topic | Channel, staged: _Owner, now: float) -> None:
        if staged.deferred:
            deferred = owner.deferred  # type: ignore[union-attr]  # only channels defer
            for msg, delay_ms in staged.deferred:
                if msg.id in deferred:
                    self.skipped += 1
                else:
                    deferred.add(msg.id, msg, now + delay_ms / 1000)
        memory = staged.memory
        if not memory:
            return
        room = max(0, owner.mem_limit - len(owner.memory))
        owner.memory.extend(memory[:room])
        spill = memory[room:]
        if spill and not self.nsqd.write_to_backend(owner.backend, spill):
            raise SnapshotDiskError(self.nsqd.health_error or "failed to write to the disk queue")

    def _put_piece(self, backend: BackendQueue, offset: int, size: int, count: int) -> None:
        """Staged disk records into ``backend``: one write when it is a disk queue."""
        data = os.pread(self._stage_fd, size, offset)
        if len(data) != size:
            raise SnapshotDiskError(f"the stage file ends early at {offset + len(data)}")
        try:
            if isinstance(backend, DiskQueue):
                backend.put_framed(data, count)
            else:
                backend.put_many(split_framed(data))
        except (OSError, ValueError) as exc:
            self.nsqd.set_health(str(exc))
            self.nsqd.logger.error("failed to write message to backend - %s", exc)
            raise SnapshotDiskError(str(exc)) from None

    def remember(self, file: str | None, load_id: str = "") -> None:
        """Leave this load on the nsqd (``nsqd.loaded_snapshot``): from ``file`` (its base
        name is kept), now, as part of load ``load_id``."""
        self.nsqd.loaded_snapshot = LoadedSnapshot(
            load_name(file), time.time_ns(), self.replace, self.messages, load_id
        )

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


def stage_file(
    path: str | os.PathLike[str], loaders_for: Callable[[Header], Sequence[NodeLoader]]
) -> tuple[SnapshotSummary, Sequence[NodeLoader]]:
    """Read the snapshot at ``path`` once, strictly, staging each record into the loader of
    its node (``loaders_for`` gives them, from the file's header; it may raise). The file's
    summary and the loaders, ready to :meth:`~NodeLoader.finish`. On SnapshotError (with the
    line) or OSError every loader is discarded: nothing was applied, nothing stays staged."""
    from ...snapshot.files import SnapshotReader, open_for_reading

    loaders: Sequence[NodeLoader] = ()
    try:
        with open_for_reading(path) as stream:
            reader = SnapshotReader(stream)
            loaders = loaders_for(reader.header)
            for first, records, plain in reader.batches():
                for loader in loaders:
                    loader.stage(records, first, plain)
            assert reader.summary is not None
            return reader.summary, loaders
    except BaseException:
        for loader in loaders:
            loader.discard()
        raise


def _set_paused(owner: Topic | Channel, paused: bool, exactly: bool) -> None:
    """Pause ``owner`` as the file says; unpause it too when ``exactly`` (a replace)."""
    if paused and not owner.paused:
        owner.pause()
    elif exactly and not paused and owner.paused:
        owner.unpause()
