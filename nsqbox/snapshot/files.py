"""Snapshot files: written and read as streams, gzip when the name ends in ``.gz``.

:class:`SnapshotWriter` writes a header, records as they come and the end line, through a
buffer of :data:`WRITE_CHUNK` bytes: saving a million messages never holds them all.
:func:`open_for_writing` writes ``FILE.part`` and renames it to ``FILE`` only once complete,
so a failed save leaves no half snapshot under the name.

:class:`SnapshotReader` reads a block of whole lines at a time (:data:`READ_BLOCK` bytes,
decoded in one call) and is strict: the header first, every record checked alone
(:func:`~.format.decode_records`) and against the lines before it (a channel's topic, a
message's topic and channel listed first, no name twice, no deferred id twice in one
channel), the end line last with the right counts, nothing after it. It raises
:class:`~.format.SnapshotError` naming the line it failed on, for a damaged gzip stream or a
file cut short too. It hands out records one at a time or a checked block at a time
(:meth:`SnapshotReader.batches`). Since it only reads, a load that must change nothing for a
bad file stages what it reads and applies the stage only once the reader reached a valid
end (nsqd's loader does); :func:`check_snapshot` only checks.
:data:`GZIP_LEVEL` is the level ``.gz`` snapshots are written at.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Final, NamedTuple, cast

from ..wire.message import MESSAGE_HEADER, MIN_VALID_MSG_LENGTH
from .behind import WriteBehind
from .format import (
    FORMAT_VERSION,
    MAX_LINE_BYTES,
    ChannelLine,
    EndLine,
    Header,
    MessageLine,
    Publisher,
    Record,
    SnapshotError,
    TopicLine,
    body_fields,
    decode_block,
    decode_header,
    encode,
    encode_lines,
)

__all__ = [
    "GZIP_LEVEL",
    "READ_BLOCK",
    "WRITE_CHUNK",
    "Batch",
    "SnapshotReader",
    "SnapshotSummary",
    "SnapshotWriter",
    "check_snapshot",
    "is_gzip_name",
    "open_for_reading",
    "open_for_writing",
]

#: gzip's level for a ``.gz`` snapshot: zlib's fastest, about twice level 6's speed for a
#: file about a fifth bigger (JSON lines of JSON events: 84 MB to 13.5 MB, not 11.0 MB).
GZIP_LEVEL: Final = 1
#: Bytes the writer gathers before each write.
WRITE_CHUNK: Final = 1024 * 1024
#: Bytes the reader reads at a time (whole lines of them are decoded in one call).
READ_BLOCK: Final = 1024 * 1024
_READ_BUFFER: Final = 1024 * 1024


def is_gzip_name(path: str | os.PathLike[str]) -> bool:
    """Whether the snapshot at ``path`` is gzip (its name ends in ``.gz``)."""
    return os.fspath(path).endswith(".gz")


@contextlib.contextmanager
def open_for_writing(path: str | os.PathLike[str], *, behind: bool = False) -> Iterator[IO[bytes]]:
    """A binary stream for a new snapshot at ``path``: ``path.part`` until the block ends
    without an error, then renamed to ``path``; on an error the part file is removed.
    With ``behind``, a ``.gz`` one is compressed and written on a thread of its own
    (:class:`~.behind.WriteBehind`; zlib lets go of the GIL, so the caller's lines and the
    compression run at once): the stream only takes ``write``. (A plain file's writes
    stay in the caller's thread: they cost little, and a second thread taking the GIL
    back after each write costs the caller as much.)"""
    final = os.fspath(path)
    part = final + ".part"
    raw = open(part, "wb")  # noqa: SIM115 - closed below, before the rename
    try:
        with contextlib.ExitStack() as stack:
            stream: IO[bytes] = raw
            if is_gzip_name(final):
                stream = stack.enter_context(
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL)  # type: ignore[arg-type]
                )
            if behind and stream is not raw:
                writer = WriteBehind(stream)
                try:
                    yield cast("IO[bytes]", writer)
                except BaseException:
                    writer.abandon()
                    raise
                writer.close()
            else:
                yield stream
        raw.close()
        os.replace(part, final)
    except BaseException:
        raw.close()
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise


def open_for_reading(path: str | os.PathLike[str]) -> IO[bytes]:
    """A binary stream of the snapshot at ``path`` (gunzipped when its name ends in .gz)."""
    if is_gzip_name(path):
        return gzip.GzipFile(os.fspath(path), "rb")  # type: ignore[return-value]
    return open(path, "rb", buffering=_READ_BUFFER)


class SnapshotWriter:
    """Writes a snapshot's lines to ``stream``: the header at once, the end on :meth:`finish`.

    With ``header`` None it writes records only, and :meth:`finish` no end line: one node's
    part of a snapshot, which the caller puts between a header and an end of its own
    (:meth:`add_counts` counts such a part in).
    """

    def __init__(self, stream: IO[bytes], header: Header | None) -> None:
        self._stream = stream
        self._chunks: list[bytes] = []
        if header is not None:
            header.nsqbox_snapshot = FORMAT_VERSION
            self._chunks.append(encode(header))
        self._whole = header is not None
        self._held = 0
        #: Message lines not yet encoded: encoded together, one call per chunk.
        self._pending: list[MessageLine] = []
        self.topics = 0
        self.channels = 0
        self.messages = 0

    def _add(self, line: bytes) -> None:
        if self._pending:
            self._encode_pending()
        self._chunks.append(line)
        self._held += len(line)
        if self._held >= WRITE_CHUNK:
            self.flush()

    def raw(self, data: bytes) -> None:
        """Lines encoded elsewhere (a node's spool), written as they are; the caller counts
        them in (:meth:`add_counts`)."""
        self._add(data)

    def add_counts(self, topics: int, channels: int, messages: int) -> None:
        """Count records written to the stream by someone else (another node's part)."""
        self.flush()
        self.topics += topics
        self.channels += channels
        self.messages += messages

    def _encode_pending(self) -> None:
        self._chunks.append(encode_lines(self._pending))
        self._pending = []

    def flush(self) -> None:
        """Write what is gathered."""
        if self._pending:
            self._encode_pending()
        self._stream.write(b"".join(self._chunks))
        self._chunks = []
        self._held = 0

    def topic(self, node: int, topic: str, paused: bool) -> None:
        """A topic line."""
        self.topics += 1
        self._add(encode(TopicLine(node, topic, paused)))

    def channel(self, node: int, topic: str, channel: str, paused: bool) -> None:
        """A channel line (its topic's line came first)."""
        self.channels += 1
        self._add(encode(ChannelLine(node, topic, channel, paused)))

    def message(
        self,
        node: int,
        topic: str,
        channel: str | None,
        msg_id: bytes,
        timestamp: int,
        attempts: int,
        body: bytes,
        delay_ms: int = 0,
        disk: bool = False,
        publisher: Publisher | None = None,
    ) -> None:
        """A message line (its topic's and channel's lines came first)."""
        self.messages += 1
        text: str | None
        b64: str | None = None
        try:
            text = body.decode()
        except UnicodeDecodeError:
            text, b64 = body_fields(body)
        self._pending.append(
            MessageLine(
                node,
                topic,
                msg_id.decode("ascii", "replace"),
                timestamp,
                attempts,
                channel,
                delay_ms,
                disk,
                text,
                b64,
                publisher,
            )
        )
        self._held += len(body) + 100
        if self._held >= WRITE_CHUNK:
            self.flush()

    def encoded_messages(self, lines: bytes, count: int) -> None:
        """``count`` message lines encoded by the caller as :meth:`message` encodes them."""
        self._add(lines)
        self.messages += count

    def disk_messages(
        self,
        node: int,
        topic: str,
        channel: str | None,
        records: list[bytes],
        *,
        disk: bool = True,
    ) -> None:
        """Message lines for ``records`` as a disk queue holds them (the message encoding:
        timestamp, attempts, id, body), queued on disk (``disk``; False: in memory), with no
        delay: the lines :meth:`message` would write, built a batch at a time. A record too
        short to be a message is skipped, as nsqd skips it."""
        unpack = MESSAGE_HEADER.unpack_from
        line = MessageLine
        pending = self._pending
        start = len(pending)
        try:
            for data in records:
                if len(data) >= MIN_VALID_MSG_LENGTH:
                    timestamp, attempts = unpack(data)
                    pending.append(
                        line(
                            node,
                            topic,
                            data[10:26].decode("ascii"),
                            timestamp,
                            attempts,
                            channel,
                            0,
                            disk,
                            data[26:].decode(),
                        )
                    )
        except UnicodeDecodeError:  # a body that is not text (or a bad id): one at a time
            del pending[start:]
            for data in records:
                if len(data) >= MIN_VALID_MSG_LENGTH:
                    timestamp, attempts = unpack(data)
                    self.message(
                        node, topic, channel, data[10:26], timestamp, attempts, data[26:], 0, disk
                    )
            return
        added = len(pending) - start
        self.messages += added
        self._held += sum(map(len, records)) + 100 * added
        if self._held >= WRITE_CHUNK:
            self.flush()

    def finish(self) -> None:
        """The end line (unless writing records only), and write everything out."""
        if self._whole:
            self._add(encode(EndLine(self.topics, self.channels, self.messages)))
        self.flush()


class Batch(NamedTuple):
    """A block of checked records (:meth:`SnapshotReader.batches`)."""

    #: The line of the first record.
    first: int
    records: list[Record]
    #: Only messages, all of one node, topic and channel (listed before them), with text
    #: bodies and no delay (:func:`~.format.decode_block`): a loader may take them whole.
    plain: bool


@dataclass(frozen=True, slots=True)
class SnapshotSummary:
    """What a checked snapshot holds."""

    header: Header
    topics: int
    channels: int
    messages: int
    lines: int


class SnapshotReader:
    """Reads and checks a snapshot from ``stream`` (module doc), a block of whole lines at a
    time (:data:`READ_BLOCK` bytes, each block decoded in one call).

    :attr:`header` is read on construction; iterating yields the records before the end
    line, and :attr:`summary` is set once iteration finished at a valid end. :attr:`line` is
    the last line read.
    """

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.line = 0
        self.summary: SnapshotSummary | None = None
        #: Bytes read after the last whole line handed out (the start of the next line).
        self._rest = b""
        self._eof = False
        block = self._next_block()
        if block is None:
            raise SnapshotError(1, "empty file: no snapshot header")
        first = block.index(b"\n") + 1
        self.header = decode_header(block[:first], 1)
        self.line = 1
        #: Whole lines read with the header, not yet handed out.
        self._pending = block[first:]

    def _read(self) -> bytes:
        try:
            return self._stream.read(READ_BLOCK)
        except EOFError:
            raise SnapshotError(self.line + 1, "truncated: the gzip stream ends early") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise SnapshotError(self.line + 1, f"damaged gzip stream ({exc})") from None

    def _next_block(self) -> bytes | None:
        """The next whole lines (ending in a newline), or None at the end of the stream.

        A line is at most :data:`~.format.MAX_LINE_BYTES` bytes before its newline: only the
        first line of a block can be longer than a block, so only it is measured.
        """
        parts = [self._rest]
        size = len(self._rest)
        while not self._eof:
            data = self._read()
            if not data:
                self._eof = True
                break
            parts.append(data)
            size += len(data)
            if b"\n" not in data:  # inside one long line: keep reading, up to the bound
                if size > MAX_LINE_BYTES:
                    raise SnapshotError(self.line + 1, f"line longer than {MAX_LINE_BYTES} bytes")
                continue
            whole = b"".join(parts)
            if whole.index(b"\n") > MAX_LINE_BYTES:
                raise SnapshotError(self.line + 1, f"line longer than {MAX_LINE_BYTES} bytes")
            cut = whole.rindex(b"\n") + 1
            self._rest = whole[cut:]
            return whole[:cut]
        self._rest = b""
        if not size:
            return None
        if size > MAX_LINE_BYTES:
            raise SnapshotError(self.line + 1, f"line longer than {MAX_LINE_BYTES} bytes")
        raise SnapshotError(self.line + 1, "truncated: the last line has no newline")

    def _blocks(self) -> Iterator[bytes]:
        if self._pending:
            yield self._pending
            self._pending = b""
        while (block := self._next_block()) is not None:
            yield block

    def __iter__(self) -> Iterator[Record]:
        for first, records, _ in self.batches():
            for number, record in enumerate(records, first):
                self.line = number
                yield record

    def batches(self) -> Iterator[Batch]:
        """The records a block of lines at a time, each block checked whole before it is
        handed out: :class:`Batch` ``(first, records, plain)``, ``first`` being the line of
        its first record.

        Iterating the reader yields the same records one at a time. The end line is not
        handed out: :attr:`summary` is set when it is reached, and valid.
        """
        nodes = self.header.nodes
        topics: set[tuple[int, str]] = set()
        channels: set[tuple[int, str, str]] = set()
        deferred: dict[tuple[int, str, str], set[str]] = {}
        messages = 0
        message = MessageLine
        for block in self._blocks():
            first = self.line + 1
            records, plain = decode_block(block, first, nodes)
            if plain:  # one node, topic and channel, no delay: one look at its key
                head = records[0]
                assert isinstance(head, MessageLine)
                plain = (
                    (head.node, head.topic) in topics
                    if head.channel is None
                    else (head.node, head.topic, head.channel) in channels
                )
                if plain:  # (else the loop below names the line)
                    messages += len(records)
                    self.line = first + len(records) - 1
                    yield Batch(first, records, True)
                    continue
            for number, record in enumerate(records, first):
                if type(record) is message:  # the common line first
                    channel = record.channel
                    if channel is None:
                        if (record.node, record.topic) not in topics:
                            raise SnapshotError(number, f"topic {record.topic!r} not listed before")
                    else:
                        key = (record.node, record.topic, channel)
                        if key not in channels:
                            raise SnapshotError(
                                number, f"channel {record.topic}:{channel} not listed before"
                            )
                        if record.delay_ms:
                            ids = deferred.setdefault(key, set())
                            if record.id in ids:
                                raise SnapshotError(number, f"deferred message {record.id} twice")
                            ids.add(record.id)
                    messages += 1
                elif isinstance(record, EndLine):
                    self.line = number
                    after = first + block.count(b"\n") - 1 - number  # lines after it read
                    self._finish(record, len(topics), len(channels), messages, after > 0)
                    if number > first:
                        yield Batch(first, records[: number - first], False)
                    return
                elif isinstance(record, TopicLine):
                    if (record.node, record.topic) in topics:
                        raise SnapshotError(number, f"topic {record.topic!r} listed twice")
                    topics.add((record.node, record.topic))
                else:
                    assert isinstance(record, ChannelLine)
                    if (record.node, record.topic) not in topics:
                        raise SnapshotError(number, f"topic {record.topic!r} not listed before")
                    ckey = (record.node, record.topic, record.channel)
                    if ckey in channels:
                        raise SnapshotError(number, f"channel {record.channel!r} listed twice")
                    channels.add(ckey)
            self.line = first + len(records) - 1
            yield Batch(first, records, False)
        raise SnapshotError(self.line + 1, "truncated: the file ends before its end line")

    def _finish(self, end: EndLine, topics: int, channels: int, messages: int, more: bool) -> None:
        number = self.line
        if (end.topics, end.channels, end.messages) != (topics, channels, messages):
            raise SnapshotError(
                number,
                f"the end line counts {end.topics} topics, {end.channels} channels and "
                f"{end.messages} messages; the file holds {topics}, {channels} and {messages}",
            )
        if more or self._next_block() is not None:
            raise SnapshotError(number + 1, "a line after the end line")
        self.summary = SnapshotSummary(self.header, topics, channels, messages, number)


def check_snapshot(path: str | os.PathLike[str]) -> SnapshotSummary:
    """Read the whole snapshot at ``path`` and check it; SnapshotError (with the line) or
    OSError when it cannot be loaded. Memory does not grow with the file."""
    with open_for_reading(path) as stream:
        reader = SnapshotReader(stream)
        for _ in reader:
            pass
        assert reader.summary is not None
        return reader.summary
