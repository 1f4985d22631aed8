"""A snapshot file's I/O on a thread of its own (nsqbox.snapshot.ahead): the same bytes and
the same errors, in the same order, as reading or writing in the caller's thread; the
thread gone once the stream is closed, whatever happened."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from nsqbox.snapshot.ahead import DEPTH, ReadAhead, WriteBehind
from nsqbox.snapshot.files import (
    READ_BLOCK,
    SnapshotReader,
    SnapshotWriter,
    check_snapshot,
    open_for_reading,
    open_for_writing,
)
from nsqbox.snapshot.format import Header, SnapshotError


def snapshot_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nsqbox-snapshot-")]


def write_big(path: Path, messages: int = 20_000, *, behind: bool = False) -> None:
    with open_for_writing(path, behind=behind) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=1))
        writer.topic(0, "t", False)
        writer.channel(0, "t", "c", False)
        for index in range(messages):
            body = os.urandom(8).hex().encode() * 6
            writer.message(0, "t", "c", b"%016x" % index, index, 0, body, disk=True)
        writer.finish()


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz"])
def test_a_file_written_behind_is_the_file_written_in_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    write_big(path, behind=True)
    summary = check_snapshot(path)
    assert (summary.topics, summary.channels, summary.messages) == (1, 1, 20_000)
    assert not snapshot_threads()
    with open_for_reading(path, ahead=True) as ahead:
        data = b"".join(iter(lambda: ahead.read(READ_BLOCK), b""))
    with open_for_reading(path) as stream:
        assert data == stream.read()
    assert len(data) > DEPTH * READ_BLOCK  # more than the thread may hold ahead
    assert not snapshot_threads()


def test_reads_of_any_size_hand_out_the_stream_in_order() -> None:
    data = os.urandom(3 * 1000 + 17)
    with ReadAhead(io.BytesIO(data), 1000) as ahead:
        got = [ahead.read(7), ahead.read(), ahead.read(5000), ahead.read(1)]
        while piece := ahead.read(300):
            got.append(piece)
        assert ahead.read(3) == b""
    assert b"".join(got) == data
    assert [len(piece) for piece in got[:5]] == [7, 993, 1000, 1, 300]
    assert not snapshot_threads()


@pytest.mark.parametrize("cut", [12, 4000])
def test_a_cut_gzip_stream_is_refused_at_the_same_line_ahead_or_not(
    tmp_path: Path, cut: int
) -> None:
    whole = tmp_path / "whole.jsonl.gz"
    write_big(whole)
    data = whole.read_bytes()
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(data[: len(data) - cut])
    errors = []
    for ahead in (False, True):
        with (
            open_for_reading(bad, ahead=ahead) as stream,
            pytest.raises(SnapshotError) as raised,
        ):
            for _ in SnapshotReader(stream):
                pass
        errors.append((raised.value.line, raised.value.reason))
    assert errors[0] == errors[1]
    assert "truncated" in errors[1][1] or "damaged" in errors[1][1]
    assert not snapshot_threads()


def test_a_damaged_gzip_stream_is_refused_at_the_same_line_ahead_or_not(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl.gz"
    write_big(whole)
    data = bytearray(whole.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(bytes(data))
    errors = []
    for ahead in (False, True):
        with (
            open_for_reading(bad, ahead=ahead) as stream,
            pytest.raises(SnapshotError) as raised,
        ):
            for _ in SnapshotReader(stream):
                pass
        errors.append((raised.value.line, raised.value.reason))
    assert errors[0] == errors[1]
    assert not snapshot_threads()


def test_a_reader_that_stops_early_stops_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    write_big(path)
    with open_for_reading(path, ahead=True) as stream:
        assert stream.read(10) == b'{"nsqbox_s'
        assert snapshot_threads() == ["nsqbox-snapshot-read"]
    assert not snapshot_threads()


class _FailingStream(io.RawIOBase):
    """A stream whose disk fills up after ``room`` bytes."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.written = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        chunk = bytes(data)  # type: ignore[call-overload]
        if len(self.written) + len(chunk) > self.room:
            raise OSError(28, "No space left on device")
        self.written += chunk
        return len(chunk)


def test_a_write_that_fails_behind_is_raised_to_the_writer() -> None:
    stream = _FailingStream(room=2500)
    behind = WriteBehind(stream)  # type: ignore[arg-type]

    def fill() -> None:
        for _ in range(100):
            behind.write(b"x" * 1000)
        behind.close()

    with pytest.raises(OSError, match="No space left"):
        fill()
    behind.abandon()
    assert bytes(stream.written) == b"x" * 2000  # in order, nothing after the failure
    assert not snapshot_threads()


def test_a_save_interrupted_behind_leaves_no_file_and_no_thread(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"

    def save() -> None:
        with open_for_writing(path, behind=True) as stream:
            for _ in range(50):
                stream.write(os.urandom(64 * 1024))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save()
    assert sorted(os.listdir(tmp_path)) == []
    assert not snapshot_threads()
