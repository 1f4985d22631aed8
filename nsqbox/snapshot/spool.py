"""A node's cut as it waits in its spool: sections of raw records, made lines by the saver.

A node's cut must be quick (nothing else runs on the node while it is taken), so the node
does not build a JSON line per message: it writes its spool as *sections*, each a header line
(:class:`Section`, JSON) and then ``bytes`` bytes:

- ``lines``: snapshot lines as they go in the file (topics and channels), ``topics``,
  ``channels`` and ``messages`` of them;
- ``queued``: messages of ``node``/``topic``/``channel`` framed as the disk queue frames them
  (``[int32 BE length][int64 BE timestamp][uint16 BE attempts][16-byte id][body]``, back to
  back), ``disk`` saying whether they were in the disk queue: a disk queue's unread bytes
  copied as they are, or memory and in-flight messages framed the same way;
- ``deferred``: the same, each record with its delay left first
  (``[int32 length][int64 delay_ms][timestamp][attempts][id][body]``).

:class:`SpoolConverter` turns a spool into snapshot lines (:class:`~.files.SnapshotWriter`),
fed a piece at a time: the saver (``nsqbox snapshot save``, another process; the box's own
save, off its event loop) does the per-message work. A record shorter than a message is
skipped, as nsqd skips it. Everything a spool says is bounded before it is believed: a
section header's line and fields, a record's length within its section; a spool that does
not parse raises :class:`SpoolError`.
"""

from __future__ import annotations

import struct
from typing import Annotated, Final, Literal

import msgspec

from ..wire.message import MIN_VALID_MSG_LENGTH
from .bulk import RECORD_HEAD, QueuedLines
from .files import SnapshotWriter
from .format import MAX_LINE_BYTES, MAX_NODES

__all__ = ["MAX_SECTION_LINE", "Section", "SpoolConverter", "SpoolError", "section_line"]

#: The longest section header line (names are at most 64 characters).
MAX_SECTION_LINE: Final = 4096
_LENGTH: Final = struct.Struct(">i")
_DEFERRED: Final = struct.Struct(">qqH")
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**62)]


class SpoolError(ValueError):
    """A spool that does not parse (a node's cut damaged, or not a spool)."""


class Section(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A section's header line (module doc)."""

    kind: Literal["lines", "queued", "deferred"]
    bytes: _Count
    node: Annotated[int, msgspec.Meta(ge=0, lt=MAX_NODES)] = 0
    topic: Annotated[str, msgspec.Meta(max_length=64)] = ""
    channel: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    disk: bool = False
    topics: _Count = 0
    channels: _Count = 0
    messages: _Count = 0


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Section)


def section_line(section: Section) -> bytes:
    """A section's header line."""
    return _encoder.encode(section) + b"\n"


class SpoolConverter:
    """Turns one node's spool, fed in pieces (:meth:`feed`), into snapshot lines written by
    ``writer``; :meth:`close` checks the spool ended at a section's end."""

    def __init__(self, writer: SnapshotWriter) -> None:
        self._writer = writer
        self._rest = b""
        self._section: Section | None = None
        self._left = 0
        #: The current queued section's line builder.
        self._bulk: QueuedLines | None = None

    def feed(self, data: bytes) -> None:
        """The spool's next bytes."""
        buf = self._rest + data if self._rest else data
        pos = 0
        end = len(buf)
        while pos < end:
            section = self._section
            if section is None:
                newline = buf.find(b"\n", pos, pos + MAX_SECTION_LINE)
                if newline < 0:
                    if end - pos >= MAX_SECTION_LINE:
                        raise SpoolError("a section header longer than its bound")
                    break
                try:
                    section = _decoder.decode(buf[pos:newline])
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    raise SpoolError(f"not a section header ({exc})") from None
                self._section, self._left = section, section.bytes
                self._bulk = None
                pos = newline + 1
            else:
                stop = pos + min(self._left, end - pos)
                if section.kind == "lines":
                    self._writer.raw(buf[pos:stop])
                    done = stop
                else:
                    done = self._records(section, buf, pos, stop)
                    if done == pos:  # a record not whole yet
                        if stop - pos >= self._left:
                            raise SpoolError("a record runs past its section's end")
                        break
                self._left -= done - pos
                pos = done
            if self._left == 0 and self._section is not None:
                if self._section.kind == "lines":
                    section = self._section
                    self._writer.add_counts(section.topics, section.channels, section.messages)
                self._section = None
        self._rest = buf[pos:]
        if len(self._rest) > MAX_LINE_BYTES + MAX_SECTION_LINE:
            raise SpoolError("a record longer than its bound")

    def _records(self, section: Section, buf: bytes, pos: int, stop: int) -> int:
        """Write the whole records of ``buf[pos:stop]``; where the first partial one starts."""
        if section.kind == "queued":
            pos = self._queued(section, buf, pos, stop)
        unpack = _LENGTH.unpack_from
        records: list[bytes] = []
        while pos + 4 <= stop:
            size = unpack(buf, pos)[0]
            if size < 0 or size > MAX_LINE_BYTES:
                raise SpoolError(f"a record of {size} bytes")
            if pos + 4 + size > stop:
                break
            records.append(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if section.kind == "queued":
            self._writer.disk_messages(
                section.node, section.topic, section.channel, records, disk=section.disk
            )
            return pos
        message = self._writer.message
        for data in records:
            if len(data) >= 8 + MIN_VALID_MSG_LENGTH:
                delay, timestamp, attempts = _DEFERRED.unpack_from(data)
                if delay < 0:
                    raise SpoolError(f"a delay of {delay} ms")
                message(
                    section.node, section.topic, section.channel, data[18:34], timestamp,
                    attempts, data[34:], delay,
                )  # fmt: skip
        return pos

    def _queued(self, section: Section, buf: bytes, pos: int, stop: int) -> int:
        """:meth:`_records` for queued records whose lines :class:`~.bulk.QueuedLines` can
        build a run at a time (text bodies, the common case): where the records it took
        end; the caller takes the rest (a body that is not text...) one at a time."""
        bulk = self._bulk
        if bulk is None:
            bulk = self._bulk = QueuedLines(
                section.node, section.topic, section.channel, section.disk
            )
        writer = self._writer
        while (run := bulk.run(buf, pos, stop)) is not None:  # records of one size
            pos, taken, count = run
            writer.encoded_messages(taken, count)
        head, length = RECORD_HEAD.unpack_from, _LENGTH.unpack_from
        records: list[tuple[int, int, int, bytes, bytes]] = []
        start = pos
        while pos + 4 <= stop:  # records of sizes that differ: walked one at a time
            if pos + RECORD_HEAD.size <= stop:
                record = head(buf, pos)
                size = record[0]
            else:
                size = length(buf, pos)[0]
            if size < 0 or size > MAX_LINE_BYTES:
                raise SpoolError(f"a record of {size} bytes")
            end = pos + 4 + size
            if end > stop:
                break
            if size >= MIN_VALID_MSG_LENGTH:  # (a shorter one is skipped, as nsqd skips it)
                records.append((*record, buf[pos + RECORD_HEAD.size : end]))
            pos = end
        if records:
            lines = bulk.lines(records)
            if lines is None:
                return start
            writer.encoded_messages(lines, len(records))
        return pos

    def close(self) -> None:
        """The spool ended: SpoolError unless it ended at a section's end."""
        if self._rest or self._section is not None:
            raise SpoolError("the spool ends inside a section")
