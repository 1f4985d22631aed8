"""The snapshot format and files: written as a stream, read back strictly (docs/state.md)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from nsqbox.snapshot.files import (
    SnapshotReader,
    SnapshotWriter,
    check_snapshot,
    open_for_reading,
    open_for_writing,
)
from nsqbox.snapshot.format import Header, MessageLine, SnapshotError, message_body

ID = b"0123456789abcdef"


def write_sample(path: Path) -> None:
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=2, clock="manual", clock_offset=5.0))
        writer.topic(0, "orders", False)
        writer.channel(0, "orders", "billing", True)
        writer.message(0, "orders", "billing", ID, 123, 2, b"hello \xc3\xa9")
        writer.message(0, "orders", "billing", ID.upper(), 124, 0, b"\xff\x00", delay_ms=1500)
        writer.topic(1, "orders", True)
        writer.message(1, "orders", None, ID, 125, 0, b"")
        writer.finish()


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz"])
def test_a_written_snapshot_reads_back_record_by_record(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    write_sample(path)
    assert not (tmp_path / (name + ".part")).exists()
    with open_for_reading(path) as stream:
        reader = SnapshotReader(stream)
        records = list(reader)
    assert reader.header.clock == "manual"
    assert reader.header.clock_offset == 5.0
    messages = [r for r in records if isinstance(r, MessageLine)]
    assert [message_body(m) for m in messages] == [b"hello \xc3\xa9", b"\xff\x00", b""]
    assert messages[0].body == "hello é"  # UTF-8: text a person can read
    assert (messages[1].body_b64, messages[1].delay_ms) == ("/wA=", 1500)
    assert (messages[2].channel, messages[2].node) == (None, 1)
    summary = check_snapshot(path)
    assert (summary.topics, summary.channels, summary.messages, summary.lines) == (2, 1, 3, 8)
    if name.endswith(".gz"):
        assert gzip.decompress(path.read_bytes()).startswith(b'{"nsqbox_snapshot":1')


def test_a_failed_save_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    def save() -> None:
        with open_for_writing(path) as stream:
            stream.write(b"partial")
            raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        save()
    assert list(tmp_path.iterdir()) == []


def lines_of(tmp_path: Path) -> list[bytes]:
    path = tmp_path / "good.jsonl"
    write_sample(path)
    return path.read_bytes().splitlines(keepends=True)


def refused(tmp_path: Path, data: bytes, name: str = "bad.jsonl") -> SnapshotError:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(SnapshotError) as info:
        check_snapshot(path)
    return info.value


def test_a_file_cut_at_a_line_boundary_is_refused_after_its_last_line(tmp_path: Path) -> None:
    lines = lines_of(tmp_path)
    error = refused(tmp_path, b"".join(lines[:5]))
    assert error.line == 6
    assert "ends before its end line" in str(error)


def test_a_file_cut_inside_a_line_names_that_line(tmp_path: Path) -> None:
    lines = lines_of(tmp_path)
    error = refused(tmp_path, b"".join(lines[:3]) + lines[3][:20])
    assert (error.line, error.reason) == (4, "truncated: the last line has no newline")


def test_a_cut_gzip_stream_is_refused(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(lines_of(tmp_path)))
    error = refused(tmp_path, data[: len(data) - 12], "bad.jsonl.gz")
    assert "truncated" in error.reason


@pytest.mark.parametrize(
    ("index", "line", "reason"),
    [
        (3, b'{"kind":"message",\n', "not a JSON record"),
        (2, b'{"kind":"topic","node":9,"topic":"orders"}\n', "node 9 is not below"),
        (2, b'{"kind":"topic","node":0,"topic":"bad topic"}\n', "invalid topic name"),
        (2, b'{"kind":"topic","node":0,"topic":"t","extra":1}\n', "unknown field"),
        (3, b'{"kind":"channel","node":0,"topic":"nope","channel":"c"}\n', "not listed before"),
        (
            3,
            b'{"kind":"message","node":0,"topic":"orders","id":"xyz","timestamp":1,"body":""}\n',
            "at `$.id`",
        ),
        (
            3,
            b'{"kind":"message","node":0,"topic":"orders","id":"0123456789abcdef",'
            b'"timestamp":1,"attempts":70000,"body":""}\n',
            "<= 65535 - at `$.attempts`",
        ),
        (
            3,
            b'{"kind":"message","node":0,"topic":"orders","id":"0123456789abcdef",'
            b'"timestamp":1,"body_b64":"***"}\n',
            "not base64",
        ),
        (
            3,
            b'{"kind":"message","node":0,"topic":"bad topic","id":"0123456789abcdef",'
            b'"timestamp":1,"body":""}\n',
            "not listed before",
        ),
        (
            3,
            b'{"kind":"message","node":0,"topic":"orders","id":"0123456789abcdef",'
            b'"timestamp":1,"body":"","body_b64":""}\n',
            "only one of body and body_b64",
        ),
        (7, b'{"kind":"end","topics":2,"channels":1,"messages":9}\n', "the end line counts"),
    ],
)
def test_a_damaged_line_is_refused_with_its_number(
    tmp_path: Path, index: int, line: bytes, reason: str
) -> None:
    lines = lines_of(tmp_path)
    lines[index] = line
    error = refused(tmp_path, b"".join(lines))
    assert error.line == index + 1
    assert reason in error.reason


def test_lines_after_the_end_and_foreign_headers_are_refused(tmp_path: Path) -> None:
    lines = lines_of(tmp_path)
    assert refused(tmp_path, b"".join([*lines, b"{}\n"])).line == 9
    error = refused(tmp_path, b'{"nsqbox_snapshot":2,"nodes":1}\n' + b"".join(lines[1:]))
    assert (error.line, "version 2" in error.reason) == (1, True)
    assert refused(tmp_path, b"").line == 1
