"""A damaged or unwritable data path: nsqd repairs what it can, refuses what it cannot read,
and never loses what it can still write (issue #16 items 4, 5 and 6)."""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.nsqd.domain.metadata import (
    ChannelMetadata,
    Metadata,
    TopicMetadata,
    encode_metadata,
    load_deferred,
)
from nsqbox.nsqd.domain.nsqd import ShutdownError
from nsqbox.nsqd.server import serve_nsqd
from nsqbox.wire import commands
from nsqbox.wire.message import decode_message
from tests.conftest import make_options
from tests.helpers import RawConn, refusal_line
from tests.reliability.process import NSQDProcess

GUARD = 30  # seconds: a hang fails the test instead of blocking the run


def nsqd_dat(*topics: tuple[str, tuple[str, ...]]) -> bytes:
    return encode_metadata(
        Metadata(
            topics=tuple(
                TopicMetadata(name, channels=tuple(ChannelMetadata(c) for c in channels))
                for name, channels in topics
            )
        )
    )


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path``, name -> bytes."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def records(path: Path) -> list[bytes]:
    """The records of a diskqueue data file."""
    data = path.read_bytes()
    out, off = [], 0
    while off < len(data):
        (size,) = struct.unpack_from(">i", data, off)
        out.append(data[off + 4 : off + 4 + size])
        off += 4 + size
    return out


# -- 4: a meta file whose depth promises records that are not there ---------------------------


async def test_inconsistent_meta_file_does_not_freeze_the_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "nsqd.dat").write_bytes(nsqd_dat(("t", ("c", "d"))))
    # depth 5 with the reader at the writer; depth 5 with the reader past the writer
    (data / "t:c.diskqueue.meta.dat").write_text("5\n0,0\n0,0\n")
    (data / "t:d.diskqueue.meta.dat").write_text("5\n0,90\n0,20\n")
    with trio.fail_after(GUARD), NSQDProcess(data) as nsqd:
        conns = []
        for channel in ("c", "d"):
            conn = await RawConn.open(nsqd.tcp)
            await conn.sub("t", channel, rdy=10)  # the first RDY used to spin forever
            conns.append(conn)
        async with httpx.AsyncClient(base_url=nsqd.http_url) as http:
            ping = await http.get("/ping")
            assert (ping.status_code, ping.text) == (200, "OK")
            assert (await http.post("/pub?topic=t", content=b"after")).text == "OK"
            for conn in conns:
                msg = await conn.message()
                assert msg.body == b"after"
                await conn.send(commands.fin(msg.id))
            stats = (await http.get("/stats?format=json&topic=t")).json()
        for conn in conns:
            await conn.aclose()
    # NSQDProcess.stop checked that SIGTERM stopped it with status 0 and no traceback
    depths = {c["channel_name"]: c["depth"] for c in stats["topics"][0]["channels"]}
    assert depths == {"c": 0, "d": 0}
    log = nsqd.log()
    assert "DISKQUEUE(t:c) positive depth at tail (5), metadata corruption, resetting 0" in log
    assert "DISKQUEUE(t:d) metadata corruption: read position 0,90 past write position 0,20" in log


# -- 5: a nsqd.dat that cannot be read refuses the start and changes nothing -----------------


def populated_data_path(path: Path, nsqd_dat_bytes: bytes) -> dict[str, bytes]:
    """A data path with queue files and a deferral file next to ``nsqd_dat_bytes``."""
    path.mkdir()
    (path / "nsqd.dat").write_bytes(nsqd_dat_bytes)
    (path / "t.diskqueue.000000.dat").write_bytes(struct.pack(">i", 4) + b"junk")
    (path / "t.diskqueue.meta.dat").write_bytes(b"1\n0,0\n0,8\n")
    (path / "nsqbox.deferred.dat").write_bytes(
        b'{"topic":"t","channel":"c","id":"0123456789abcdef","deadline_ns":1}\n'
    )
    return snapshot(path)


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        (["nsqd", "--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"], "failed to load"),
        (["up", "--ephemeral-ports"], "failed to start nsqbox - failed to load"),
    ],
    ids=["nsqd", "up"],
)
def test_unreadable_nsqd_dat_refuses_the_start_and_leaves_the_files(
    tmp_path: Path, command: list[str], prefix: str
) -> None:
    data = tmp_path / "data"
    before = populated_data_path(data, nsqd_dat(("t", ("c",)))[:-7])  # truncated
    done = subprocess.run(
        [sys.executable, "-m", "nsqbox", *command, f"--data-path={data}"],
        capture_output=True,
        timeout=GUARD,
        check=False,
        cwd=tmp_path,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr
    line = refusal_line(stderr)
    assert line.startswith("[nsqd] "), stderr
    assert line.endswith(
        f"FATAL: {prefix} metadata - failed to parse metadata in {data / 'nsqd.dat'}"
        " - Input data was truncated"
    )
    assert snapshot(data) == before


# -- 6: one queue that cannot be persisted at shutdown does not cost the others --------------


async def test_shutdown_flushes_every_queue_despite_one_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts: dict[str, object] = {"data_path": str(tmp_path), "mem_queue_size": 10_000}
    bodies = [b"msg-%04d" % i for i in range(1000)]
    with trio.fail_after(GUARD):
        with pytest.RaisesGroup(ShutdownError) as raised:
            async with trio.open_nursery() as nursery:
                first = await nursery.start(serve_nsqd, make_options(**opts))
                subs = []
                for topic in ("a", "b"):  # a first: its queues are closed first
                    subs.append(await RawConn.open(first.tcp))
                    await subs[-1].sub(topic, "c")  # no RDY: everything stays queued
                pub = await RawConn.open(first.tcp)
                await pub.mpub("a", [b"a-%d" % i for i in range(10)])
                await pub.mpub("b", bodies)
                await pub.send(commands.dpub("b", 3_600_000, b"later"))
                assert await pub.response() == b"OK"
                await pub.aclose()
                for conn in subs:
                    await conn.aclose()
                # a:c's meta file cannot be written: its path is a directory (works as root too)
                (tmp_path / "a:c.diskqueue.meta.dat").mkdir()
                deferred_id = next(iter(first.nsqd.topics["b"].channels["c"].deferred)).id
                caplog.clear()
                with caplog.at_level(logging.ERROR, logger="nsqbox.nsqd"):
                    nursery.cancel_scope.cancel()
    error = raised.value.exceptions[0]
    assert len(error.failures) == 1
    assert error.failures[0].startswith("diskqueue(a:c): metadata ([Errno 21] Is a directory")
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1
    assert failures[0].startswith("diskqueue(a:c) failed to persist at exit - [Errno 21]")

    # b was flushed in full: 1000 messages then the deferred one, and its meta file says so
    stored = records(tmp_path / "b:c.diskqueue.000000.dat")
    assert [decode_message(r).body for r in stored] == [*bodies, b"later"]
    size = (tmp_path / "b:c.diskqueue.000000.dat").stat().st_size
    assert (tmp_path / "b:c.diskqueue.meta.dat").read_text() == f"1001\n0,0\n0,{size}\n"
    assert (tmp_path / "nsqd.dat").read_bytes() == nsqd_dat(("a", ("c",)), ("b", ("c",)))
    deadlines = load_deferred(str(tmp_path))
    assert list(deadlines) == [("b", "c", deferred_id)]
    # a:c's messages are in its data file, only its meta file is missing
    assert len(records(tmp_path / "a:c.diskqueue.000000.dat")) == 10

    os.rmdir(tmp_path / "a:c.diskqueue.meta.dat")
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            second = await nursery.start(serve_nsqd, make_options(**opts))
            for topic, count in (("b", 1000), ("a", 10)):
                conn = await RawConn.open(second.tcp)
                await conn.sub(topic, "c", rdy=2500)
                got = []
                for _ in range(count):
                    msg = await conn.message()
                    got.append(msg.body)
                    await conn.send(commands.fin(msg.id))
                expected = bodies if topic == "b" else [b"a-%d" % i for i in range(10)]
                assert sorted(got) == sorted(expected)
                await conn.aclose()
            assert second.nsqd.topics["b"].channels["c"].deferred_count() == 1
            nursery.cancel_scope.cancel()
