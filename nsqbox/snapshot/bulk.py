"""Message lines from disk queue records, a block of records at a time (the saver's hot loop).

A snapshot of a big box is, line after line, queued messages of one channel. The spool holds
them framed as the disk queue frames them (:mod:`.spool`); :class:`QueuedLines` turns a run of
such records into their snapshot lines with no Python per record where it can: a run of
records of one size is unpacked by :meth:`struct.Struct.iter_unpack`, the bodies are checked
and escaped as JSON by msgspec in one call, and each line is one ``bytes % tuple`` of a
template, every step a C loop over the run (``map``). The lines are byte for byte those
:class:`~.files.SnapshotWriter` writes for the same messages (``encode`` of a
:class:`~.format.MessageLine`): the template is built from msgspec's own encoding of the
names, and the bodies are msgspec's. A run it cannot take whole (a body that is not UTF-8, an
id that is not plain ASCII) makes :meth:`QueuedLines.lines` return None, and the caller takes
those records one at a time as before.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Final

import msgspec

from ..wire.message import MIN_VALID_MSG_LENGTH

__all__ = ["RECORD_HEAD", "QueuedLines"]

#: A queued record's head: its length, then the message's timestamp, attempts and id.
RECORD_HEAD: Final = struct.Struct(">iqH16s")
_encoder: Final = msgspec.json.Encoder()
#: A byte msgspec escapes in a JSON string (an id holding one goes the slow way).
_needs_escape: Final = re.compile(rb'[\x00-\x1f"\\]').search
#: The bytes msgspec writes in a JSON string as they are.
_VERBATIM: Final = bytes(b for b in range(0x20, 0x100) if b not in b'"\\')
_id, _timestamp, _attempts, _body = itemgetter(3), itemgetter(1), itemgetter(2), itemgetter(4)
_LENGTH: Final = struct.Struct(">i")
#: Same-size records unpacked per call: what a 4 MiB piece of 100-byte messages holds.
_RUN: Final = 32 * 1024


class QueuedLines:
    """The lines of queued records of one node, topic and channel (``disk``: they were in
    the disk queue), as :meth:`~.files.SnapshotWriter.message` writes them."""

    def __init__(self, node: int, topic: str, channel: str | None, disk: bool) -> None:
        head = b'{"kind":"message","node":%d,"topic":%s,"id":"' % (node, _encoder.encode(topic))
        tail = b"" if channel is None else b',"channel":' + _encoder.encode(channel)
        if disk:
            tail += b',"disk":true'
        tail += b',"body":'
        #: The pieces of a line, between its id, timestamp (and attempts) and body.
        self._pieces = (head, b'","timestamp":', tail)
        head, tail = head.replace(b"%", b"%%"), tail.replace(b"%", b"%%")
        #: Lines without attempts (0 is left out) and with them, as ``%`` templates.
        self._plain = head + b'%s","timestamp":%d' + tail + b"%s}\n"
        self._tried = head + b'%s","timestamp":%d,"attempts":%d' + tail + b"%s}\n"
        self._structs: dict[int, struct.Struct] = {}

    def run(self, buf: bytes, pos: int, stop: int) -> tuple[int, bytes, int] | None:
        """The lines of the records from ``buf[pos]`` on, up to ``stop``, when they all have
        the first one's size (up to :data:`_RUN` of them): ``(where they end, their lines,
        how many)``. None when there are not two whole such records, the first is too short
        to be a message, a length differs (four strided compares over the run: a run of
        messages of one size is what a big snapshot is) or :meth:`lines` cannot take them."""
        if pos + RECORD_HEAD.size > stop:
            return None
        size = _LENGTH.unpack_from(buf, pos)[0]
        if size < MIN_VALID_MSG_LENGTH:
            return None
        step = size + 4
        count = min((stop - pos) // step, _RUN)
        if count < 2:
            return None
        end = pos + count * step
        length = _LENGTH.pack(size)
        for k in range(4):  # every record's length is the first's: exactly framed
            if buf[pos + k : end : step] != length[k : k + 1] * count:
                return None
        unpack = self._structs.get(size)
        if unpack is None:
            if len(self._structs) >= 64:
                self._structs.clear()
            body = size - MIN_VALID_MSG_LENGTH
            unpack = self._structs[size] = struct.Struct(f">iqH16s{body}s")
        records = list(unpack.iter_unpack(memoryview(buf)[pos:end]))
        lines = self.lines(records)
        return None if lines is None else (end, lines, count)

    def lines(self, records: Sequence[tuple[int, int, int, bytes, bytes]]) -> bytes | None:
        """The lines of ``records``, each ``(length, timestamp, attempts, id, body)``, all
        messages; None when a body is not UTF-8 or an id not plain ASCII (msgspec would
        escape it, or the writer replace it)."""
        ids = b"".join(map(_id, records))
        if not ids.isalnum() and (not ids.isascii() or _needs_escape(ids)):
            return None
        raw = list(map(_body, records))
        joined = b"\n".join(raw)
        try:
            joined.decode()  # each body UTF-8 (a newline between them: no sequence spans two)
        except UnicodeDecodeError:
            return None
        head, middle, tail = self._pieces
        tried = any(map(_attempts, records))
        if not tried and len(joined.translate(None, _VERBATIM)) == len(raw) - 1:
            # no byte of a body is escaped (only the newlines between them are left): the
            # bodies go in as they are
            bodies, tail, end = raw, tail + b'"', b'"}\n'
        else:
            # one JSON string a line: a string's JSON never holds a raw newline
            texts = list(map(bytes.decode, raw))
            bodies, end = _encoder.encode_lines(texts).split(b"\n"), b"}\n"
        if tried:
            plain, tried_line = self._plain, self._tried
            return b"".join(
                [
                    tried_line % (r[3], r[1], r[2], body) if r[2] else plain % (r[3], r[1], body)
                    for r, body in zip(records, bodies, strict=False)
                ]
            )
        # the timestamps' digits by msgspec too, then the pieces of every line in one join
        timestamps = _encoder.encode(list(map(_timestamp, records)))[1:-1].split(b",")
        return b"".join(
            chain.from_iterable(
                zip(
                    repeat(head),
                    map(_id, records),
                    repeat(middle),
                    timestamps,
                    repeat(tail),
                    bodies,
                    repeat(end),
                )
            )
        )
