"""A corrupt data path: nsqd starts and delivers every readable message, or refuses with one
line and touches nothing. It never hangs and never dies once started.

Each case starts from the same data path, written by a real server (mem-queue-size 0, no
consumer): topic ``t`` and a bystander topic ``b``, each with channel ``c`` holding 30
messages in three data files of 10 records (40 bytes each: a 4-byte length, 26 bytes of
message header, a 10-byte body). One thing is broken in ``t:c``'s files or in ``nsqd.dat``.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from nsqbox.nsqd.domain.metadata import ChannelMetadata, Metadata, TopicMetadata, encode_metadata
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from nsqbox.wire import commands
from tests.conftest import make_options
from tests.helpers import RawConn, publish, refusal_line, wait_until

GUARD = 30  # seconds; a hang fails the test, it is not a timing assertion
RECORD = 40
PER_FILE = 10
COUNT = 30
OPTS: dict[str, object] = {"mem_queue_size": 0, "max_bytes_per_file": RECORD * PER_FILE}


def body(topic: str, i: int) -> bytes:
    return b"%s-%08d" % (topic.encode(), i)


def segment(data: Path, num: int) -> Path:
    return data / f"t:c.diskqueue.{num:06d}.dat"


def meta(data: Path) -> Path:
    return data / "t:c.diskqueue.meta.dat"


async def build(data: Path) -> None:
    """The healthy data path every case breaks one thing in."""
    async with trio.open_nursery() as nursery:
        addrs = await nursery.start(serve_nsqd, make_options(data_path=str(data), **OPTS))
        for topic in ("t", "b"):
            sub = await RawConn.open(addrs.tcp)
            await sub.sub(topic, "c")  # the channel, no RDY: every message goes to disk
            await publish(addrs.tcp, topic, *(body(topic, i) for i in range(COUNT)))
            await sub.aclose()
        nursery.cancel_scope.cancel()
    assert meta(data).read_text() == f"{COUNT}\n0,0\n2,{RECORD * PER_FILE}\n"


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


async def drain(addrs: NSQDAddresses, topic: str, count: int) -> list[bytes]:
    """Exactly ``count`` messages of ``topic``/c, then check that nothing else is queued."""
    conn = await RawConn.open(addrs.tcp)
    await conn.sub(topic, "c", rdy=COUNT + 10)
    got = [(await conn.message()) for _ in range(count)]
    channel = addrs.nsqd.topics[topic].channels["c"]
    # all delivered and still in flight, nothing left that was not
    assert (channel.depth(), channel.in_flight_count()) == (0, count)
    for msg in got:
        await conn.send(commands.fin(msg.id))
    await wait_until(lambda: channel.in_flight_count() == 0)  # not requeued by the close
    await conn.aclose()
    return [m.body for m in got]


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)


# -- cases that start: the message indexes of t/c that must be delivered --------------------

ALL = list(range(COUNT))
#: file 1 cut or broken at its record 5 (message 15): 0-14 and file 2 survive
UP_TO_15 = [*range(15), *range(20, 30)]


def at_record(num: int, index: int, data: bytes) -> Callable[[Path], None]:
    """Overwrite the start of record ``index`` of data file ``num``."""
    return lambda d: overwrite(segment(d, num), index * RECORD, data)


def meta_text(text: str | bytes) -> Callable[[Path], None]:
    raw = text.encode() if isinstance(text, str) else text
    return lambda d: meta(d).write_bytes(raw)


def truncate(num: int, size: int) -> Callable[[Path], None]:
    return lambda d: os.truncate(segment(d, num), size)


def read_past_eof(data: Path) -> None:
    """File 0 read and removed, the read position of file 1 past its end: file 1 is done."""
    segment(data, 0).unlink()
    meta(data).write_text("30\n1,99999999\n2,400\n")


STARTS = [
    pytest.param(
        truncate(1, 3 * RECORD + 15), [*range(13), *range(20, 30)], id="truncated-segment"
    ),
    pytest.param(at_record(1, 5, b"\xde\xad\xbe\xef" * 4), UP_TO_15, id="garbage-in-segment"),
    pytest.param(at_record(1, 5, struct.pack(">i", 2**31 - 1)), UP_TO_15, id="huge-length-prefix"),
    pytest.param(at_record(1, 5, struct.pack(">i", 5000)), UP_TO_15, id="length-past-eof"),
    pytest.param(at_record(2, 0, bytes(4)), [*range(20)], id="zero-length-prefix"),
    pytest.param(
        lambda d: segment(d, 1).unlink(), [*range(10), *range(20, 30)], id="missing-segment"
    ),
    pytest.param(lambda d: segment(d, 2).unlink(), [*range(20)], id="missing-last-segment"),
    pytest.param(meta_text(b"\x00\xffnot a meta file"), ALL, id="meta-garbage"),
    pytest.param(meta_text(""), ALL, id="meta-empty"),
    pytest.param(lambda d: meta(d).unlink(), ALL, id="meta-missing"),
    pytest.param(meta_text("30\n-1,-40\n2,400\n"), ALL, id="meta-negative"),
    pytest.param(meta_text("30\n2,400\n0,0\n"), ALL, id="meta-read-file-past-write"),
    pytest.param(meta_text("5\n2,800\n2,400\n"), ALL, id="meta-read-pos-past-write"),
    pytest.param(meta_text("30\n0,0\n999999999,12345\n"), ALL, id="meta-write-file-far-away"),
    pytest.param(meta_text("30\n0,0\n2,99999999999\n"), ALL, id="meta-write-pos-past-eof"),
    pytest.param(read_past_eof, [*range(20, 30)], id="meta-read-pos-past-eof"),
    # a file before the read file (as if its removal had failed): the meta file is not believed
    pytest.param(meta_text("20\n1,0\n2,400\n"), ALL, id="meta-file-before-read-file"),
    pytest.param(meta_text("5\n2,400\n2,400\n"), ALL, id="meta-depth-at-tail"),
    pytest.param(meta_text("1\n0,0\n2,400\n"), ALL, id="meta-depth-too-small"),
    pytest.param(meta_text("0\n0,0\n2,400\n"), ALL, id="meta-depth-zero"),
    pytest.param(meta_text("-7\n0,0\n2,400\n"), ALL, id="meta-depth-negative"),
    pytest.param(meta_text("99999999999\n0,0\n2,400\n"), ALL, id="meta-depth-too-large"),
    pytest.param(meta_text("25\n0,0\n2,200\n"), ALL, id="meta-stale-write-pos"),
]


@pytest.mark.parametrize(("break_it", "expected"), STARTS)
async def test_starts_and_delivers_every_readable_message(
    tmp_path: Path, break_it: Callable[[Path], None], expected: list[int]
) -> None:
    await build(tmp_path)
    break_it(tmp_path)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(serve_nsqd, make_options(data_path=str(tmp_path), **OPTS))
            got = await drain(addrs, "t", len(expected))
            assert sorted(got) == [body("t", i) for i in expected]
            assert await drain(addrs, "b", COUNT) == [body("b", i) for i in range(COUNT)]
            # still serving: a new message goes through the repaired queue
            await publish(addrs.tcp, "t", b"t-after")
            assert await drain(addrs, "t", 1) == [b"t-after"]
            nursery.cancel_scope.cancel()  # and a clean shutdown raises nothing


def nsqd_dat(*topics: tuple[str, tuple[str, ...]]) -> bytes:
    return encode_metadata(
        Metadata(
            topics=tuple(
                TopicMetadata(name, channels=tuple(ChannelMetadata(c) for c in chans))
                for name, chans in topics
            )
        )
    )


@pytest.mark.parametrize(
    ("content", "topics"),
    [
        (nsqd_dat(("b", ("c",)), ("bad topic!", ("c",)), ("t", ("c", "bad/channel"))), ["b", "t"]),
        (nsqd_dat(("b", ("c",)), ("", ()), ("t" * 65, ()), ("t", ("c",))), ["b", "t"]),
        (b'{"topics":[null,{"name":"b","channels":[null,{"name":"c"}]}]}', ["b"]),
        (b"null", []),
    ],
    ids=["invalid-names", "empty-and-too-long-names", "null-entries", "null"],
)
async def test_nsqd_dat_oddities_that_nsqd_accepts(
    tmp_path: Path, content: bytes, topics: list[str]
) -> None:
    await build(tmp_path)
    (tmp_path / "nsqd.dat").write_bytes(content)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(serve_nsqd, make_options(data_path=str(tmp_path), **OPTS))
            assert sorted(addrs.nsqd.topics) == topics
            if "b" in topics:
                assert await drain(addrs, "b", COUNT) == [body("b", i) for i in range(COUNT)]
            if "t" in topics:
                assert await drain(addrs, "t", COUNT) == [body("t", i) for i in range(COUNT)]
            nursery.cancel_scope.cancel()


# -- cases that refuse: one line, exit status 1, every file as it was ------------------------

GOOD = nsqd_dat(("t", ("c",)), ("b", ("c",)))
REFUSES = [
    pytest.param(GOOD[: len(GOOD) // 2], "Input data was truncated", id="truncated"),
    pytest.param(
        b"\x89PNG\r\n\x1a\n", "JSON is malformed: invalid character (byte 0)", id="garbage"
    ),
    pytest.param(b"", "Input data was truncated", id="empty"),
    pytest.param(b"[]", "Expected `object | null`, got `array`", id="array"),
    pytest.param(
        b'{"topics":{"name":"t"}}',
        "Expected `array | null`, got `object` - at `$.topics`",
        id="topics-not-a-list",
    ),
    pytest.param(
        b'{"topics":[{"name":7}]}',
        "Expected `str`, got `int` - at `$.topics[0].name`",
        id="name-not-a-string",
    ),
]


@pytest.mark.parametrize(("content", "reason"), REFUSES)
async def test_unreadable_nsqd_dat_refuses_with_one_line(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    await build(data)
    (data / "nsqd.dat").write_bytes(content)
    before = snapshot(data)
    done = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [
                sys.executable,
                "-m",
                "nsqbox",
                "nsqd",
                f"--data-path={data}",
                "--tcp-address=127.0.0.1:0",
                "--http-address=127.0.0.1:0",
            ],
            capture_output=True,
            timeout=GUARD,
            check=False,
        )
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    line = refusal_line(stderr)
    fn = data / "nsqd.dat"
    expected = f" FATAL: failed to load metadata - failed to parse metadata in {fn} - {reason}"
    assert line.startswith("[nsqd] "), line
    assert line.endswith(expected), line
    assert snapshot(data) == before
