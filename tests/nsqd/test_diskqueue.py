"""DiskQueue: go-diskqueue v1.1.0's file format and behaviour, checked against golden files.

The scenarios follow go-diskqueue's own tests (TestDiskQueueRoll, ...Empty, ...Corruption,
...Resize, ...SyncAfterRead); the expected bytes and names in tests/nsqd/golden were worked out
from diskqueue.go, not captured from this implementation.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import struct
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nsqbox.nsqd.diskqueue import reader as dq_module
from nsqbox.nsqd.diskqueue.queue import DiskQueue, DiskQueueClosedError, backend_name

GOLDEN = Path(__file__).parent / "golden"
BIG = 1 << 30  # a sync_every that never triggers


def golden_hex(name: str) -> bytes:
    """Bytes of an annotated hex fixture (``#`` starts a comment)."""
    text = "".join(line.split("#", 1)[0] for line in (GOLDEN / name).read_text().splitlines())
    return bytes.fromhex("".join(text.split()))


def golden_json(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text())  # type: ignore[no-any-return]


def make_queue(
    tmp_path: Path,
    name: str = "test",
    max_bytes_per_file: int = 1024,
    min_msg_size: int = 0,
    max_msg_size: int = 1024,
    sync_every: int = BIG,
    sync_timeout: float = 2.0,
    clock: Callable[[], float] | None = None,
) -> DiskQueue:
    extra = {} if clock is None else {"clock": clock}
    return DiskQueue(
        name,
        str(tmp_path),
        max_bytes_per_file,
        min_msg_size,
        max_msg_size,
        sync_every,
        sync_timeout,
        **extra,
    )


def listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def pop_all(q: DiskQueue) -> list[bytes]:
    out = []
    while (data := q.pop()) is not None:
        out.append(data)
    return out


# -- format ----------------------------------------------------------------------------------


def test_backend_name_is_topic_or_topic_colon_channel() -> None:
    assert backend_name("orders") == "orders"
    assert backend_name("orders", "archive") == "orders:archive"


def test_file_names(tmp_path: Path) -> None:
    q = make_queue(tmp_path, name="orders:archive")
    assert q.file_name(0) == str(tmp_path / "orders:archive.diskqueue.000000.dat")
    assert q.file_name(1234567) == str(tmp_path / "orders:archive.diskqueue.1234567.dat")
    assert q.meta_file_name == str(tmp_path / "orders:archive.diskqueue.meta.dat")
    q.close()


def test_record_bytes_match_golden(tmp_path: Path) -> None:
    record = golden_hex("record.hex")
    message = record[4:]
    # The fixture's message part is nsqd's encoding: ts, attempts, id, body.
    assert struct.unpack(">qH", message[:10]) == (1257894000000000000, 1)
    assert message[10:26] == b"0123456789abcdef"
    assert message[26:] == b"hello world"

    q = make_queue(tmp_path, min_msg_size=26)
    q.put(message)
    q.put(message)
    q.close()
    assert (tmp_path / "test.diskqueue.000000.dat").read_bytes() == record * 2
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == f"2\n0,0\n0,{2 * len(record)}\n"


def test_reads_files_written_by_go(tmp_path: Path) -> None:
    # A queue as go-diskqueue leaves it: two files, one record already consumed.
    record = golden_hex("record.hex")
    (tmp_path / "t.diskqueue.000003.dat").write_bytes(record * 2)
    (tmp_path / "t.diskqueue.000004.dat").write_bytes(record)
    (tmp_path / "t.diskqueue.meta.dat").write_text(f"2\n3,{len(record)}\n4,{len(record)}\n")
    q = make_queue(tmp_path, name="t", max_bytes_per_file=2 * len(record))
    assert q.depth == 2
    assert pop_all(q) == [record[4:], record[4:]]
    assert q.depth == 0
    q.close()
    assert listing(tmp_path) == ["t.diskqueue.000004.dat", "t.diskqueue.meta.dat"]
    assert (tmp_path / "t.diskqueue.meta.dat").read_text() == "0\n4,41\n4,41\n"


# -- rolling ---------------------------------------------------------------------------------


def test_roll_like_go(tmp_path: Path) -> None:
    # TestDiskQueueRoll: 10 records of 14 bytes fill a 140-byte file; the 11th rolls.
    msg = bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 0])
    q = make_queue(tmp_path, max_bytes_per_file=140, min_msg_size=10)
    for i in range(11):
        q.put(msg)
        assert q.depth == i + 1
    assert q.positions == (0, 0, 1, 14)
    for _ in range(3):
        assert q.pop() == msg
    q.close()
    assert (tmp_path / "test.diskqueue.meta.dat").read_bytes() == (
        GOLDEN / "roll.meta.dat"
    ).read_bytes()


def test_roll_file_names_match_golden(tmp_path: Path) -> None:
    g = golden_json("roll.json")
    msg = b"0123456789"
    q = make_queue(tmp_path, name=g["name"], max_bytes_per_file=g["max_bytes_per_file"])
    for _ in range(g["puts"]):
        q.put(msg)
    q.close()
    assert listing(tmp_path) == g["files_after_puts"]
    sizes = [(tmp_path / n).stat().st_size for n in g["files_after_puts"][:-1]]
    assert sizes == g["sizes_after_puts"]
    assert (tmp_path / f"{g['name']}.diskqueue.meta.dat").read_text() == g["meta_after_puts"]

    q = make_queue(tmp_path, name=g["name"], max_bytes_per_file=g["max_bytes_per_file"])
    for _ in range(g["pops"]):
        assert q.pop() == msg
    q.close()
    assert listing(tmp_path) == g["files_after_pops"]
    assert (tmp_path / f"{g['name']}.diskqueue.meta.dat").read_text() == g["meta_after_pops"]


def test_roll_syncs_and_records_the_new_write_file(tmp_path: Path) -> None:
    q = make_queue(tmp_path, max_bytes_per_file=140)
    for _ in range(10):
        q.put(b"0123456789")
    assert not (tmp_path / "test.diskqueue.meta.dat").exists()
    q.put(b"0123456789")
    # writeOne syncs after moving to the new file and before writing to it.
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == "10\n0,0\n1,0\n"
    q.close()


def test_oversized_record_gets_a_file_of_its_own(tmp_path: Path) -> None:
    q = make_queue(tmp_path, max_bytes_per_file=16)
    q.put(b"x" * 30)
    q.put(b"y" * 30)
    assert q.positions == (0, 0, 1, 34)
    assert pop_all(q) == [b"x" * 30, b"y" * 30]
    q.close()


def test_resize_max_bytes_per_file_between_runs(tmp_path: Path) -> None:
    # TestDiskQueueResize: the reader uses a complete file's real size, not max_bytes_per_file.
    msg = bytearray(range(10))
    q = make_queue(tmp_path, max_bytes_per_file=8 * 14, min_msg_size=10)
    for i in range(9):
        msg[0] = i
        q.put(bytes(msg))
    assert q.positions[2:] == (1, 14)
    q.close()
    q = make_queue(tmp_path, max_bytes_per_file=10 * 14, min_msg_size=10)
    for i in range(10):
        msg[0] = 20 + i
        q.put(bytes(msg))
    assert q.positions[2:] == (2, 14)
    assert q.depth == 19
    assert [m[0] for m in pop_all(q)] == [*range(9), *range(20, 30)]
    assert q.depth == 0
    q.close()
    assert not [n for n in listing(tmp_path) if n.endswith(".bad")]


def test_reader_caught_up_when_writer_rolls_leaves_no_bad_file(tmp_path: Path) -> None:
    # go-diskqueue issue #42: v1.1.0 would call the finished file corrupt here.
    q = make_queue(tmp_path, max_bytes_per_file=140)
    for _ in range(10):
        q.put(b"a" * 10)
    assert len(pop_all(q)) == 10
    q.put(b"b" * 10)
    assert q.pop() == b"b" * 10
    assert q.depth == 0
    q.close()
    assert listing(tmp_path) == ["test.diskqueue.000001.dat", "test.diskqueue.meta.dat"]
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == "0\n1,14\n1,14\n"


def test_finished_file_after_restart_leaves_no_bad_file(tmp_path: Path) -> None:
    q = make_queue(tmp_path, max_bytes_per_file=140)
    for _ in range(10):
        q.put(b"a" * 10)
    pop_all(q)
    q.close()  # meta: read 0,140 write 0,140
    q = make_queue(tmp_path, max_bytes_per_file=140)
    q.put(b"b" * 10)  # rolls to file 1
    q.close()
    q = make_queue(tmp_path, max_bytes_per_file=140)
    assert pop_all(q) == [b"b" * 10]
    q.close()
    assert listing(tmp_path) == ["test.diskqueue.000001.dat", "test.diskqueue.meta.dat"]


# -- reading ---------------------------------------------------------------------------------


def test_peek_does_not_consume(tmp_path: Path) -> None:
    q = make_queue(tmp_path)
    assert q.peek() is None
    assert q.pop() is None
    q.put(b"one")
    q.put(b"two")
    assert q.peek() == b"one"
    assert q.peek() == b"one"
    assert q.depth == 2
    assert q.pop() == b"one"
    assert q.depth == 1
    assert q.pop() == b"two"
    assert q.peek() is None
    assert q.depth == 0
    q.close()


def test_interleaved_puts_and_pops_against_a_model(tmp_path: Path) -> None:
    rng = random.Random(4150)
    model: deque[bytes] = deque()
    q = make_queue(tmp_path, max_bytes_per_file=300, max_msg_size=200)
    for step in range(3000):
        action = rng.random()
        if action < 0.5:
            data = rng.randbytes(rng.randrange(0, 200))
            q.put(data)
            model.append(data)
        elif action < 0.6:
            batch = [rng.randbytes(rng.randrange(0, 200)) for _ in range(rng.randrange(0, 8))]
            q.put_many(batch)
            model.extend(batch)
        elif action < 0.98:
            assert q.pop() == (model.popleft() if model else None)
        else:
            q.close()
            q = make_queue(tmp_path, max_bytes_per_file=300, max_msg_size=200)
        assert q.depth == len(model), step
    assert pop_all(q) == list(model)
    q.close()
    assert not [n for n in listing(tmp_path) if n.endswith(".bad")]


def test_records_larger_than_the_read_chunk(tmp_path: Path) -> None:
    big = [bytes([i]) * (dq_module.READ_CHUNK + 1000 * i) for i in range(1, 4)]
    q = make_queue(tmp_path, max_bytes_per_file=1 << 20, max_msg_size=1 << 20)
    q.put_many([b"small", *big, b"tail"])
    assert pop_all(q) == [b"small", *big, b"tail"]
    q.close()


def test_files_stay_open_and_reads_are_buffered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    preads: list[int] = []
    real_open, real_pread = os.open, os.pread

    def spy_open(path: str, flags: int, mode: int = 0o777) -> int:
        opened.append(os.path.basename(path))
        return real_open(path, flags, mode)

    def spy_pread(fd: int, n: int, offset: int) -> bytes:
        preads.append(n)
        return real_pread(fd, n, offset)

    q = make_queue(tmp_path, max_bytes_per_file=1 << 20)
    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "pread", spy_pread)
    for _ in range(500):
        q.put(b"x" * 226)
    assert len(pop_all(q)) == 500
    assert opened == ["test.diskqueue.000000.dat", "test.diskqueue.000000.dat"]  # write, read
    assert len(preads) == 1  # 500 * 230 bytes fit one chunk
    monkeypatch.undo()
    q.close()


# -- writing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [9, 1025])
def test_put_rejects_sizes_with_gos_text(tmp_path: Path, size: int) -> None:
    q = make_queue(tmp_path, min_msg_size=10, max_msg_size=1024)
    with pytest.raises(ValueError, match=re.escape(f"invalid message write size ({size}) ")):
        q.put(b"x" * size)
    with pytest.raises(ValueError, match=r"minMsgSize=10 maxMsgSize=1024$"):
        q.put_many([b"x" * 10, b"x" * size])
    assert q.depth == 0
    assert q.positions == (0, 0, 0, 0)
    q.close()
    assert not (tmp_path / "test.diskqueue.000000.dat").exists()


def test_put_many_writes_once_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = [bytes([i]) * 10 for i in range(25)]
    one = tmp_path / "one"
    one.mkdir()
    q = make_queue(one, max_bytes_per_file=140)
    for m in msgs:
        q.put(m)
    q.close()

    writes: list[int] = []
    real_pwrite = os.pwrite

    def spy_pwrite(fd: int, data: bytes, offset: int) -> int:
        writes.append(len(data))
        return real_pwrite(fd, data, offset)

    many = tmp_path / "many"
    many.mkdir()
    q = make_queue(many, max_bytes_per_file=140)
    monkeypatch.setattr(os, "pwrite", spy_pwrite)
    q.put_many(msgs[:3])
    q.put_many(msgs[3:])
    monkeypatch.undo()
    assert writes == [42, 98, 140, 70]
    assert q.depth == 25
    q.close()
    assert listing(one) == listing(many)
    for name in listing(one):
        assert (one / name).read_bytes() == (many / name).read_bytes(), name


def test_put_framed_writes_the_same_files_as_put_many(tmp_path: Path) -> None:
    # records framed by the caller (a snapshot's stage): one write while they fit in the
    # write file, split and rolled as put_many when they do not
    msgs = [bytes([i]) * (5 + i % 7) for i in range(40)]
    framed = b"".join(struct.pack(">i", len(m)) + m for m in msgs)
    one, framed_dir = tmp_path / "one", tmp_path / "framed"
    one.mkdir()
    framed_dir.mkdir()
    q = make_queue(one, max_bytes_per_file=140)
    q.put_many(msgs[:4])
    q.put_many(msgs[4:])
    q.close()
    q = make_queue(framed_dir, max_bytes_per_file=140)
    head = sum(4 + len(m) for m in msgs[:4])
    q.put_framed(framed[:head], 4)  # fits: written as given
    q.put_framed(b"", 0)
    q.put_framed(framed[head:], 36)  # rolls
    assert q.depth == 40
    q.close()
    assert listing(one) == listing(framed_dir)
    for name in listing(one):
        assert (one / name).read_bytes() == (framed_dir / name).read_bytes(), name
    q = make_queue(framed_dir, max_bytes_per_file=140)
    assert pop_all(q) == msgs
    with pytest.raises(ValueError, match="invalid framed record at 0"):
        q.put_framed(struct.pack(">i", 500) + b"x" * 200, 1)  # over the file: split, refused
    assert q.depth == 0
    q.close()


def test_failed_write_is_not_counted_and_is_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = make_queue(tmp_path)
    q.put(b"first")
    real_pwrite = os.pwrite

    def failing_pwrite(fd: int, data: bytes, offset: int) -> int:
        real_pwrite(fd, data[:3], offset)  # a torn write, then the error
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", failing_pwrite)
    with pytest.raises(OSError, match="No space left"):
        q.put(b"second")
    monkeypatch.undo()
    assert q.depth == 1
    q.put(b"third")
    assert pop_all(q) == [b"first", b"third"]
    q.close()
    assert (tmp_path / "test.diskqueue.000000.dat").read_bytes() == (
        b"\x00\x00\x00\x05first\x00\x00\x00\x05third"
    )


def test_closed_queue_refuses_writes(tmp_path: Path) -> None:
    q = make_queue(tmp_path)
    q.close()
    q.close()  # harmless
    assert q.closed
    with pytest.raises(DiskQueueClosedError, match=r"^exiting$"):
        q.put(b"x")
    with pytest.raises(DiskQueueClosedError):
        q.put_many([b"x"])
    with pytest.raises(DiskQueueClosedError):
        q.empty()
    assert q.pop() is None
    assert not q.maybe_sync()


# -- syncing and metadata --------------------------------------------------------------------


def test_sync_every_counts_puts_and_pops(tmp_path: Path) -> None:
    meta = tmp_path / "test.diskqueue.meta.dat"
    q = make_queue(tmp_path, sync_every=3)
    q.put(b"a" * 10)
    q.put(b"b" * 10)
    assert not meta.exists()
    q.put(b"c" * 10)
    assert meta.read_text() == "3\n0,0\n0,42\n"
    q.pop()
    q.pop()
    q.put(b"d" * 10)
    # TestDiskQueueSyncAfterRead: the read position is persisted too.
    assert meta.read_text() == "2\n0,28\n0,56\n"
    q.close()


def test_maybe_sync_waits_for_sync_timeout_and_activity(tmp_path: Path) -> None:
    now = [100.0]
    meta = tmp_path / "test.diskqueue.meta.dat"
    q = make_queue(tmp_path, sync_timeout=2.0, clock=lambda: now[0])
    assert not q.maybe_sync()  # no activity
    q.put(b"x" * 10)
    now[0] = 101.5
    assert not q.maybe_sync()
    assert not meta.exists()
    now[0] = 102.0
    assert q.maybe_sync()
    assert meta.read_text() == "1\n0,0\n0,14\n"
    now[0] = 110.0
    assert not q.maybe_sync()  # nothing happened since
    q.pop()
    assert q.maybe_sync()
    assert meta.read_text() == "0\n0,14\n0,14\n"
    q.close()


def test_meta_written_via_temp_file_and_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[str, str]] = []
    fsyncs: list[int] = []
    real_rename, real_fsync = os.rename, os.fsync

    def spy_rename(src: str, dst: str) -> None:
        renames.append((src, dst))
        real_rename(src, dst)

    def spy_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    q = make_queue(tmp_path, name="orders")
    q.put(b"x" * 10)
    monkeypatch.setattr(os, "rename", spy_rename)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    q.close()
    monkeypatch.undo()
    meta = str(tmp_path / "orders.diskqueue.meta.dat")
    [(src, dst)] = renames
    assert dst == meta
    assert re.fullmatch(re.escape(meta) + r"\.\d+\.tmp", src)
    assert len(fsyncs) == 2  # the data file, then the temp meta file
    assert listing(tmp_path) == ["orders.diskqueue.000000.dat", "orders.diskqueue.meta.dat"]
    assert (tmp_path / "orders.diskqueue.meta.dat").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "orders.diskqueue.000000.dat").stat().st_mode & 0o777 == 0o600


def test_restart_continues_where_it_left_off(tmp_path: Path) -> None:
    q = make_queue(tmp_path, max_bytes_per_file=100)
    for i in range(20):
        q.put(b"%010d" % i)
    for _ in range(7):
        q.pop()
    q.close()
    q = make_queue(tmp_path, max_bytes_per_file=100)
    assert q.depth == 13
    q.put(b"%010d" % 20)
    assert pop_all(q) == [b"%010d" % i for i in range(7, 21)]
    q.close()


def test_stale_meta_skips_to_new_write_file_and_salvages(tmp_path: Path) -> None:
    # The last run crashed after 5 writes but synced its meta after 3.
    records = b"".join(struct.pack(">i", 10) + b"%010d" % i for i in range(5))
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(records)
    (tmp_path / "test.diskqueue.meta.dat").write_text("3\n0,0\n0,42\n")
    q = make_queue(tmp_path)
    assert q.positions == (0, 0, 1, 0)
    # go-diskqueue keeps the stale 3 and fixes it at the tail; nsqbox counts the salvaged
    # records so that depth is right from the start (topics read while depth > 0)
    assert q.depth == 5
    assert pop_all(q) == [b"%010d" % i for i in range(5)]
    assert q.depth == 0
    q.close()
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == "0\n1,0\n1,0\n"


def test_unparseable_meta_starts_fresh(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "test.diskqueue.meta.dat").write_text("garbage")
    with caplog.at_level(logging.ERROR):
        q = make_queue(tmp_path)
    assert "failed to retrieveMetaData" in caplog.text
    assert (q.depth, q.positions) == (0, (0, 0, 0, 0))
    q.close()


# -- corruption ------------------------------------------------------------------------------


def test_truncated_file_is_renamed_bad_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    g = golden_json("corrupt.json")

    def open_queue() -> DiskQueue:
        return make_queue(
            tmp_path,
            name=g["name"],
            max_bytes_per_file=g["max_bytes_per_file"],
            min_msg_size=g["min_msg_size"],
            max_msg_size=g["max_msg_size"],
            sync_every=5,
        )

    msg = bytearray(120)
    msg[0], msg[62], msg[119] = 91, 4, 211
    q = open_queue()
    for _ in range(g["puts"]):
        q.put(bytes(msg))
    os.truncate(q.file_name(g["truncate_file"]), g["truncate_to"])
    with caplog.at_level(logging.WARNING):
        popped = [q.pop() for _ in range(g["pops"])]
    assert popped == [bytes(msg)] * g["pops"]
    assert "unexpected EOF" in caplog.text
    assert listing(tmp_path) == g["files_after_pops"]
    assert q.depth == g["depth_after_pops"]
    assert q.pop() == bytes(msg)
    assert q.depth == g["depth_after_last_pop"]
    assert q.pop() is None
    q.close()
    assert (tmp_path / f"{g['name']}.diskqueue.meta.dat").read_text() == g["meta_after_close"]


@pytest.mark.parametrize("bad_size", [0, -1, 1025], ids=["zero", "negative", "too-big"])
def test_bad_length_prefix_skips_the_write_file_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad_size: int
) -> None:
    q = make_queue(tmp_path, min_msg_size=10, max_msg_size=1024)
    q.put(b"good......")
    q.put(b"corrupted.")
    with open(q.file_name(0), "r+b") as f:
        f.seek(14)
        f.write(struct.pack(">i", bad_size))
    with caplog.at_level(logging.ERROR):
        assert q.pop() == b"good......"
        assert q.pop() is None
    assert f"invalid message read size ({bad_size})" in caplog.text
    # handleReadError on the write file: writes move on to the next file; depth resets at tail.
    assert q.positions == (1, 0, 1, 0)
    assert q.depth == 0
    q.put(b"after.....")
    assert pop_all(q) == [b"after....."]
    q.close()
    assert listing(tmp_path) == [
        "test.diskqueue.000000.dat.bad",
        "test.diskqueue.000001.dat",
        "test.diskqueue.meta.dat",
    ]


def test_missing_data_file_is_skipped(tmp_path: Path) -> None:
    q = make_queue(tmp_path, max_bytes_per_file=28)
    q.put_many([b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10, b"e" * 10])  # files 0, 1, 2
    os.remove(q.file_name(1))
    assert pop_all(q) == [b"a" * 10, b"b" * 10, b"e" * 10]
    q.close()


# -- empty and delete ------------------------------------------------------------------------


def test_empty_like_go(tmp_path: Path) -> None:
    # TestDiskQueueEmpty
    msg = bytes(10)
    q = make_queue(tmp_path, max_bytes_per_file=100)
    for i in range(100):
        q.put(msg)
        assert q.depth == i + 1
    for _ in range(3):
        q.pop()
    assert q.depth == 97
    num_files = q.positions[2]
    q.peek()
    q.empty()
    assert listing(tmp_path) == []
    assert q.depth == 0
    read_num, read_pos, write_num, write_pos = q.positions
    assert (read_num, read_pos) == (write_num, write_pos) == (num_files + 1, 0)
    assert q.peek() is None
    for i in range(100):
        q.put(msg)
        assert q.depth == i + 1
    assert len(pop_all(q)) == 100
    assert q.depth == 0
    assert q.positions[:2] == q.positions[2:]
    q.close()


def test_delete_removes_files_but_keeps_bad_ones(tmp_path: Path) -> None:
    (tmp_path / "test.diskqueue.000000.dat.bad").write_bytes(b"junk")
    (tmp_path / "other.diskqueue.000000.dat").write_bytes(b"")
    q = make_queue(tmp_path, max_bytes_per_file=28)
    q.put_many([b"x" * 10] * 5)
    q.sync()
    q.delete()
    q.delete()  # harmless
    assert q.closed
    assert listing(tmp_path) == ["other.diskqueue.000000.dat", "test.diskqueue.000000.dat.bad"]
    with pytest.raises(DiskQueueClosedError):
        q.put(b"x")


def test_missing_meta_recovers_records_instead_of_overwriting(tmp_path: Path) -> None:
    # Killed before the first sync: data files, no meta. go-diskqueue would start over at
    # file 0 and overwrite them; nsqbox reads them and writes after them.
    for num, first in ((3, 0), (4, 3)):
        records = b"".join(struct.pack(">i", 10) + b"%010d" % i for i in range(first, first + 3))
        (tmp_path / f"test.diskqueue.{num:06d}.dat").write_bytes(records)
    q = make_queue(tmp_path)
    assert q.depth == 6
    assert q.positions == (3, 0, 5, 0)
    q.put(b"%010d" % 6)
    assert pop_all(q) == [b"%010d" % i for i in range(7)]
    q.close()


# -- meta files that contradict the data files -----------------------------------------------


def _records(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def _ten(i: int) -> bytes:
    return b"%010d" % i


def test_depth_at_tail_is_reset_at_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The reported freeze: depth 5 while the reader is at the writer.
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(_records(_ten(0), _ten(1)))
    (tmp_path / "test.diskqueue.meta.dat").write_text("5\n0,28\n0,28\n")
    with caplog.at_level(logging.ERROR):
        q = make_queue(tmp_path)
    assert "positive depth at tail (5), metadata corruption, resetting 0" in caplog.text
    assert (q.depth, q.positions) == (0, (0, 28, 0, 28))
    assert q.pop() is None
    q.put(_ten(2))
    assert pop_all(q) == [_ten(2)]
    q.close()
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == "0\n0,42\n0,42\n"


def test_depth_left_at_tail_is_reset_by_the_reader(tmp_path: Path) -> None:
    q = make_queue(tmp_path)
    q.put(_ten(0))
    assert q.pop() == _ten(0)
    q._depth = 3  # what a bug elsewhere could leave: the reader must not promise more
    assert q.peek() is None
    assert q.depth == 0
    q.close()


@pytest.mark.parametrize(
    "meta",
    [
        "5\n0,56\n0,28\n",  # read position past write position
        "1\n1,0\n0,28\n",  # read file past write file
        "2\n0,-4\n0,28\n",  # negative
        "2\n0,0\n0,28\n",  # a data file after the write file
        "garbage",
        "",
    ],
    ids=[
        "read-pos-past-write",
        "read-file-past-write",
        "negative",
        "file-after-write",
        "garbage",
        "empty",
    ],
)
def test_contradicting_meta_recovers_every_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, meta: str
) -> None:
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(_records(_ten(0), _ten(1)))
    (tmp_path / "test.diskqueue.000001.dat").write_bytes(_records(_ten(2)))
    (tmp_path / "test.diskqueue.meta.dat").write_text(meta)
    with caplog.at_level(logging.WARNING):
        q = make_queue(tmp_path)
    assert "recovered 3 records from 2 file(s)" in caplog.text
    assert (q.depth, q.positions) == (3, (0, 0, 2, 0))
    q.put(_ten(3))
    assert pop_all(q) == [_ten(i) for i in range(4)]
    q.close()
    assert (tmp_path / "test.diskqueue.meta.dat").read_text() == "0\n2,14\n2,14\n"


def test_depth_zero_with_records_left_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(_records(*map(_ten, range(3))))
    (tmp_path / "test.diskqueue.meta.dat").write_text("0\n0,14\n0,42\n")
    with caplog.at_level(logging.ERROR):
        q = make_queue(tmp_path)
    assert "depth 0 with records left to read, counted 2" in caplog.text
    assert q.depth == 2
    assert pop_all(q) == [_ten(1), _ten(2)]
    q.close()


def test_depth_too_small_is_counted_again_when_it_runs_out(tmp_path: Path) -> None:
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(_records(*map(_ten, range(4))))
    (tmp_path / "test.diskqueue.meta.dat").write_text("1\n0,0\n0,56\n")
    q = make_queue(tmp_path)
    assert q.depth == 1
    assert q.pop() == _ten(0)
    assert q.depth == 3  # counted in the file, not 0 with three records unread
    assert pop_all(q) == [_ten(1), _ten(2), _ten(3)]
    assert q.depth == 0
    q.close()


def test_truncated_write_file_moves_writes_to_a_new_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = _records(*map(_ten, range(3)))
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(data[:35])  # two and a half records
    (tmp_path / "test.diskqueue.meta.dat").write_text("3\n0,0\n0,42\n")
    with caplog.at_level(logging.WARNING):
        q = make_queue(tmp_path)
    assert "metadata writePos 42 > file size of 35, skipping to new file" in caplog.text
    assert q.positions == (0, 0, 1, 0)
    # writing at 42 would leave a hole that turns the next record into garbage
    q.put(_ten(3))
    assert pop_all(q) == [_ten(0), _ten(1), _ten(3)]
    assert q.depth == 0
    q.close()
    assert listing(tmp_path) == [
        "test.diskqueue.000000.dat.bad",
        "test.diskqueue.000001.dat",
        "test.diskqueue.meta.dat",
    ]


def test_missing_files_are_skipped_in_one_step(tmp_path: Path) -> None:
    # A meta file whose write file number is far away: the reader must not walk a billion
    # missing files one by one.
    (tmp_path / "test.diskqueue.000000.dat").write_bytes(_records(_ten(0)))
    (tmp_path / "test.diskqueue.meta.dat").write_text("1\n0,0\n1000000000,0\n")
    q = make_queue(tmp_path)
    assert pop_all(q) == [_ten(0)]
    q.put(_ten(1))
    assert pop_all(q) == [_ten(1)]
    assert q.depth == 0
    q.close()


def test_pops_from_the_read_buffer_match_pops_through_peek(tmp_path: Path) -> None:
    # sync_every=1 takes every pop through peek(); BIG lets pops come from the read buffer
    (tmp_path / "fast").mkdir()
    (tmp_path / "slow").mkdir()
    fast = make_queue(tmp_path / "fast", max_bytes_per_file=300, min_msg_size=1)
    slow = make_queue(tmp_path / "slow", max_bytes_per_file=300, min_msg_size=1, sync_every=1)
    popped: dict[str, list[object]] = {"fast": [], "slow": []}
    written: list[bytes] = []
    for round_ in range(6):  # writes and reads interleaved, across file rolls and the tail
        batch = [b"r%d-%d" % (round_, i) * (1 + i % 7) for i in range(13)]
        written += batch
        for q in (fast, slow):
            q.put_many(batch)
            for _ in range(9 + round_):
                key = "fast" if q is fast else "slow"
                popped[key].append((q.pop(), q.depth, q.positions))
    for q in (fast, slow):  # to the tail, and past it
        key = "fast" if q is fast else "slow"
        popped[key] += [(q.pop(), q.depth, q.positions) for _ in range(12)]
    assert popped["fast"] == popped["slow"]
    assert [entry[0] for entry in popped["fast"]] == [*written, None, None, None]
    fast.close()
    slow.close()


def test_counted_syncs_run_on_the_syncer_and_a_release_stops_a_waiting_one(
    tmp_path: Path,
) -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Event

    meta = tmp_path / "test.diskqueue.meta.dat"
    with ThreadPoolExecutor(max_workers=1) as syncer:
        q = DiskQueue("test", str(tmp_path), 1024, 1, 64, 2, 2.0, syncer=syncer)
        q.put_many([b"a", b"b"])  # the second write's count calls for a sync: in the background
        q.settle()
        assert meta.read_text() == "2\n0,0\n0,10\n"
        gate = Event()
        syncer.submit(gate.wait)  # the syncer is busy: the next sync waits behind this
        q.put_many([b"c", b"d"])
        q.release()  # a crash: nothing more may be written to the data path
        gate.set()
    assert meta.read_text() == "2\n0,0\n0,10\n"  # the waiting sync did not write
    reopened = make_queue(tmp_path, min_msg_size=1, max_msg_size=64)
    assert [reopened.pop() for _ in range(5)] == [b"a", b"b", b"c", b"d", None]  # salvaged
    reopened.close()
