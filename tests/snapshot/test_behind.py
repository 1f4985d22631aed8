"""A .gz snapshot compressed and written on a thread of its own (nsqbox.snapshot.behind): the
same file as written in the caller's thread, a failed write raised to the caller, and the
thread gone once the stream is closed, whatever happened."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from nsqbox.snapshot.behind import DEPTH, WriteBehind
from nsqbox.snapshot.files import (
    READ_BLOCK,
    SnapshotWriter,
    check_snapshot,
    open_for_reading,
    open_for_writing,
)
from nsqbox.snapshot.format import Header


def snapshot_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nsqbox-snapshot-")]


def write_big(path: Path, messages: int = 20_000, *, behind: bool = False) -> None:
    with open_for_writing(path, behind=behind) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=1))
        writer.topic(0, "t", False)
        writer.channel(0, "t", "c", False)
        for index in range(messages):
            body = b"%032x" % (index * 7919) * 3
            writer.message(0, "t", "c", b"%016x" % index, index, 0, body, disk=True)
        writer.finish()


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz"])
def test_a_file_written_behind_is_the_file_written_in_line(tmp_path: Path, name: str) -> None:
    behind, in_line = tmp_path / "behind", tmp_path / "in-line"
    behind.mkdir()
    in_line.mkdir()
    write_big(behind / name, behind=True)
    write_big(in_line / name)
    summary = check_snapshot(behind / name)
    assert (summary.topics, summary.channels, summary.messages) == (1, 1, 20_000)
    with open_for_reading(behind / name) as one, open_for_reading(in_line / name) as other:
        data = one.read()
        assert data == other.read()
    assert len(data) > DEPTH * READ_BLOCK  # more than the thread may hold behind
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
