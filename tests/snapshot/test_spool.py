"""A node's spool made snapshot lines (nsqbox.snapshot.spool): fed in any pieces, the same
lines as the writer's own; a record too short skipped as nsqd skips it; a damaged spool
refused."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


_bodies = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"x" * 30, b'{"a": "\\\\"}', "é\u2028".encode(), b"\xff\xfe", b"\n\t\x00"]),
)
_ids = st.one_of(
    st.sampled_from([b"0123456789abcdef", b"FEDCBA9876543210"]), st.binary(min_size=16, max_size=16)
)
_records = st.lists(
    st.tuples(
        st.integers(0, 2**63 - 1),
        st.sampled_from([0, 0, 0, 1, 65535]),
        _ids,
        _bodies,
        st.integers(0, 30),  # below 26 bytes: a record too short to be a message
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(
    records=_records,
    topic=st.text(max_size=8),
    channel=st.none() | st.text(max_size=8),
    disk=st.booleans(),
    piece=st.integers(1, 5000),
)
def test_queued_records_make_the_writers_lines_whatever_they_hold(
    records: list[tuple[int, int, bytes, bytes, int]],
    topic: str,
    channel: str | None,
    disk: bool,
    piece: int,
) -> None:
    """Runs of one size, sizes that differ, bodies that are not text or need escaping, ids
    that are not ASCII, names with quotes and ``%``: the bulk lines are the writer's."""
    raw = []
    out = io.BytesIO()
    writer = SnapshotWriter(out, None)
    for timestamp, attempts, msg_id, body, short in records:
        if short < 26:
            raw.append(struct.pack(">i", short) + b"s" * short)
            continue
        raw.append(queued(timestamp, attempts, msg_id, body))
        writer.message(2, topic, channel, msg_id, timestamp, attempts, body, disk=disk)
    writer.finish()
    data = b"".join(raw)
    spool = section_line(Section("queued", len(data), 2, topic, channel, disk=disk)) + data
    lines, converted = convert(spool, piece)
    assert lines == out.getvalue()
    assert converted.messages == writer.messages


@pytest.mark.parametrize("piece", [1000, 1 << 20])
@pytest.mark.parametrize("form", [b'{"n": %05d}', "n=%05d é".encode()], ids=["escaped", "verbatim"])
def test_a_long_run_of_one_size_makes_the_writers_lines(piece: int, form: bytes) -> None:
    out = io.BytesIO()
    writer = SnapshotWriter(out, None)
    raw = []
    for index in range(5000):
        msg_id = b"%016x" % index
        body = form % index
        attempts = 3 if index == 4321 else 0
        raw.append(queued(10**18 + index, attempts, msg_id, body))
        writer.message(0, "t", "c", msg_id, 10**18 + index, attempts, body, disk=True)
    writer.finish()
    data = b"".join(raw)
    spool = section_line(Section("queued", len(data), 0, "t", "c", disk=True)) + data
    lines, converted = convert(spool, piece)
    assert lines == out.getvalue()
    assert converted.messages == 5000
