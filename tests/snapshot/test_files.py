"""The snapshot format and files: written as a stream, read back strictly (docs/state.md)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from nsqbox.snapshot.files import (
    READ_BLOCK,
    SnapshotReader,
    SnapshotWriter,
    check_snapshot,
    open_for_reading,
    open_for_writing,
)
from nsqbox.snapshot.format import Header, MessageLine, SnapshotError, message_body
from nsqbox.tools import snapshot as snapshot_tool
from nsqbox.tools.common import Fatal, ParsedArgs

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


def write_many(path: Path, count: int) -> None:
    """A snapshot of several read blocks: ``count`` messages of 100 bytes."""
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(0, nodes=1))
        writer.topic(0, "orders", False)
        writer.channel(0, "orders", "billing", False)
        for i in range(count):
            writer.message(0, "orders", "billing", b"%016x" % i, i, 1, b"x" * 100)
        writer.finish()


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz"])
def test_a_file_of_many_blocks_reads_back_and_names_a_bad_line_in_a_later_block(
    tmp_path: Path, name: str
) -> None:
    count = 3 * READ_BLOCK // 200  # about 230 bytes a line: several blocks
    path = tmp_path / name
    write_many(path, count)
    with open_for_reading(path) as stream:
        reader = SnapshotReader(stream)
        ids = [r.id for r in reader if isinstance(r, MessageLine)]
    assert ids == [f"{i:016x}" for i in range(count)]
    assert reader.summary is not None
    assert reader.summary.lines == count + 4
    with open_for_reading(path) as stream:
        lines = stream.read().splitlines(keepends=True)
    bad = count - 10  # a line index well past the first block
    for damaged, reason in [
        (b'{"kind":"message"}\n', "missing required field"),
        (b"\n", "not a JSON record"),
        (lines[bad].replace(b'"body":"', b'"body_b64":"x","body":"'), "only one of"),
        (lines[bad].replace(b'"node":0', b'"node":1'), "not below the header's 1"),
    ]:
        copy = list(lines)
        copy[bad] = damaged
        error = refused(tmp_path, b"".join(copy))
        assert (error.line, reason in error.reason) == (bad + 1, True), error
    cut = b"".join(lines)[: READ_BLOCK * 2 + 7]  # inside a line of the third block
    error = refused(tmp_path, cut)
    assert error.line == cut.count(b"\n") + 1
    assert error.reason == "truncated: the last line has no newline"
    after = refused(tmp_path, b"".join([*lines[:-1], lines[-1], lines[5]]))
    assert (after.line, after.reason) == (len(lines) + 1, "a line after the end line")


def test_whole_blocks_of_one_channel_are_handed_out_plain_and_still_checked(
    tmp_path: Path,
) -> None:
    # a block of nothing but one channel's messages (text bodies, no delay) is checked whole;
    # it must refuse what the record-by-record check refuses, at the same line
    count = 3 * READ_BLOCK // 200
    path = tmp_path / "s.jsonl"
    write_many(path, count)
    with open_for_reading(path) as stream:
        batches = list(SnapshotReader(stream).batches())
    assert [b.plain for b in batches][:2] == [False, True]  # the first holds the topic
    assert sum(len(b.records) for b in batches) == count + 2
    lines = path.read_bytes().splitlines(keepends=True)
    later = batches[1].first + 10  # a line inside a plain block
    unlisted = [
        *lines[: later - 1],
        *(line.replace(b'"billing"', b'"other"') for line in lines[later - 1 : -1]),
        lines[-1],
    ]
    error = refused(tmp_path, b"".join(unlisted))
    assert (error.line, error.reason) == (later, "channel orders:other not listed before")
    for field, value in [(b'"attempts":1', b'"attempts":1,"delay_ms":5'), (b'"id":"0', b'"id":"g')]:
        copy = list(lines)
        copy[later - 1] = copy[later - 1].replace(field, value)
        path.write_bytes(b"".join(copy))
        if field.startswith(b'"id"'):
            assert refused(tmp_path, b"".join(copy)).line == later
            continue
        with open_for_reading(path) as stream:
            batches = list(SnapshotReader(stream).batches())
        assert [b.plain for b in batches][:2] == [False, False]  # a delay: record by record


def test_a_line_longer_than_the_bound_is_refused_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsqbox.snapshot import files

    monkeypatch.setattr(files, "MAX_LINE_BYTES", READ_BLOCK * 2)
    lines = lines_of(tmp_path)
    long_line = lines[3][:-2] + b" " * (READ_BLOCK * 2) + b"}\n"
    error = refused(tmp_path, b"".join([*lines[:3], long_line, *lines[4:]]))
    assert (error.line, "line longer than" in error.reason) == (4, True)
    unended = refused(tmp_path, b"".join(lines[:3]) + b" " * (READ_BLOCK * 3))
    assert (unended.line, "line longer than" in unended.reason) == (4, True)


def test_a_message_line_may_say_who_published_it(tmp_path: Path) -> None:
    # recordings made through nsqbox's tap carry it; files without it read as before
    lines = lines_of(tmp_path)
    who = b',"publisher":{"protocol":"tcp","client_id":"c","remote_address":"10.0.0.7:5"}}\n'
    lines[3] = lines[3].rstrip(b"}\n") + who
    path = tmp_path / "who.jsonl"
    path.write_bytes(b"".join(lines))
    with open_for_reading(path) as stream:
        messages = [r for r in SnapshotReader(stream) if isinstance(r, MessageLine)]
    publisher = messages[0].publisher
    assert publisher is not None
    assert (publisher.protocol, publisher.client_id, publisher.hostname) == ("tcp", "c", "")
    assert [m.publisher for m in messages[1:]] == [None, None]
    for bad in (b'{"protocol":"smtp"}', b'{"protocol":"tcp","pid":1}', b'{"client_id":"c"}'):
        lines[3] = lines[3].split(b',"publisher":')[0] + b',"publisher":' + bad + b"}\n"
        assert refused(tmp_path, b"".join(lines)).line == 4


@pytest.mark.parametrize("channel", ["billing", None])
@pytest.mark.parametrize(
    "bodies",
    [
        [b"plain", b"", b'q"uote \\ back', "é \u2028".encode(), b"\x00\x01\x7f"],
        [b"text", b"\xff\xfe not utf-8", b"more text"],  # a batch with a binary body
    ],
    ids=["text", "binary"],
)
def test_disk_messages_writes_the_lines_message_writes(
    channel: str | None, bodies: list[bytes]
) -> None:
    import io
    import struct

    records = [
        struct.pack(">qH", 1_700_000_000_000_000_000 + i, (0, 1, 65535)[i % 3]) + ID + body
        for i, body in enumerate(bodies)
    ]
    records.insert(1, b"too short")  # not a message: skipped, as nsqd skips it
    one, batch = io.BytesIO(), io.BytesIO()
    by_one, by_batch = SnapshotWriter(one, None), SnapshotWriter(batch, None)
    for data in records:
        if len(data) >= 26:
            stamp, attempts = struct.unpack_from(">qH", data)
            by_one.message(3, "orders", channel, data[10:26], stamp, attempts, data[26:], 0, True)
    by_batch.message(3, "orders", channel, ID, 1, 0, b"before")  # pending lines stay first
    by_batch.disk_messages(3, "orders", channel, records)
    by_one.finish()
    by_batch.finish()
    before = batch.getvalue().split(b"\n", 1)
    assert b'"body":"before"' in before[0]
    assert before[1] == one.getvalue()
    assert by_batch.messages == by_one.messages + 1 == len(bodies) + 1


def test_snapshot_check_says_a_bad_file_is_not_a_snapshot_not_that_nothing_was_loaded(
    tmp_path: Path,
) -> None:
    # `nsqbox snapshot check` loads nothing, so it does not say "nothing loaded"
    lines = lines_of(tmp_path)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(lines[:5]))
    flags = snapshot_tool.snapshot_flag_set()
    with pytest.raises(Fatal) as info:
        snapshot_tool.run(flags, ParsedArgs(["check", str(path)]), io.StringIO())
    assert str(info.value) == (
        f"{path} is not a valid snapshot: line 6: truncated: the file ends before its end line"
    )
    good = tmp_path / "good.jsonl"
    out = io.StringIO()
    assert snapshot_tool.run(flags, ParsedArgs(["check", str(good)]), out) == 0
    assert out.getvalue() == (
        f"{good}: 3 messages in 2 topics and 1 channel on 2 nsqd(s), manual clock at +5s\n"
    )
