"""A node's spool made snapshot lines (nsqbox.snapshot.spool): fed in any pieces, the same
lines as the writer's own; a record too short skipped as nsqd skips it; a damaged spool
refused."""

from __future__ import annotations

import io
import struct

import pytest

from nsqbox.snapshot.files import SnapshotWriter
from nsqbox.snapshot.spool import (
    MAX_SECTION_LINE,
    Section,
    SpoolConverter,
    SpoolError,
    section_line,
)


def queued(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    data = struct.pack(">qH", timestamp, attempts) + msg_id + body
    return struct.pack(">i", len(data)) + data


def deferred(delay: int, timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    data = struct.pack(">qqH", delay, timestamp, attempts) + msg_id + body
    return struct.pack(">i", len(data)) + data


def sample() -> bytes:
    lines = (
        b'{"kind":"topic","node":1,"topic":"t"}\n'
        b'{"kind":"channel","node":1,"topic":"t","channel":"c"}\n'
    )
    memory = queued(5, 1, b"0" * 16, b"in memory") + queued(6, 0, b"1" * 16, b"\xff\x00")
    disk = queued(7, 2, b"2" * 16, "é".encode()) + struct.pack(">i", 3) + b"abc"  # too short
    disk += queued(8, 0, b"3" * 16, b"")
    later = deferred(1500, 9, 3, b"4" * 16, b"later")
    return b"".join(
        [
            section_line(Section("lines", len(lines), topics=1, channels=1)) + lines,
            section_line(Section("queued", len(memory), 1, "t", "c")) + memory,
            section_line(Section("queued", len(disk), 1, "t", "c", disk=True)) + disk,
            section_line(Section("deferred", len(later), 1, "t", None)) + later,
        ]
    )


def convert(spool: bytes, piece: int) -> tuple[bytes, SnapshotWriter]:
    out = io.BytesIO()
    writer = SnapshotWriter(out, None)
    converter = SpoolConverter(writer)
    for start in range(0, len(spool), piece):
        converter.feed(spool[start : start + piece])
    converter.close()
    writer.finish()
    return out.getvalue(), writer


def expected() -> bytes:
    out = io.BytesIO()
    writer = SnapshotWriter(out, None)
    writer.topic(1, "t", False)
    writer.channel(1, "t", "c", False)
    writer.message(1, "t", "c", b"0" * 16, 5, 1, b"in memory")
    writer.message(1, "t", "c", b"1" * 16, 6, 0, b"\xff\x00")
    writer.message(1, "t", "c", b"2" * 16, 7, 2, "é".encode(), disk=True)
    writer.message(1, "t", "c", b"3" * 16, 8, 0, b"", disk=True)
    writer.message(1, "t", None, b"4" * 16, 9, 3, b"later", 1500)
    writer.finish()
    return out.getvalue()


@pytest.mark.parametrize("piece", [1, 7, 64, 1 << 20])
def test_a_spool_fed_in_any_pieces_makes_the_writers_lines(piece: int) -> None:
    lines, writer = convert(sample(), piece)
    assert lines == expected()
    assert (writer.topics, writer.channels, writer.messages) == (1, 1, 5)


def test_a_damaged_spool_is_refused() -> None:
    spool = sample()
    for damaged, reason in [
        (spool[:-3], "ends inside a section"),
        (b'{"kind":"other","bytes":0}\n', "not a section header"),
        (b"x" * MAX_SECTION_LINE, "longer than its bound"),
        (
            section_line(Section("queued", 8, 0, "t", "c")) + struct.pack(">i", 100) + b"abcd",
            "runs past its section's end",
        ),
        (section_line(Section("queued", 4, 0, "t", "c")) + struct.pack(">i", -1), "-1 bytes"),
        (section_line(Section("deferred", 4, 0, "t", "c")) + struct.pack(">i", -5), "-5 bytes"),
    ]:
        with pytest.raises(SpoolError, match=reason):
            convert(damaged, 1 << 20)
